// Entry point of the in-memory Kubernetes API server for tests.
export { startKubeApiServer } from './server.ts';
export type { KubeApiServer, KubeApiServerOptions, LoggedRequest } from './server.ts';
export type { RequestFacts, RequestPredicate } from './faults.ts';
export type { TestUser } from './authn.ts';
