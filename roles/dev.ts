// `hookgate dev`: every role in one process, the engine in-process. Resources come
// from a manifest directory (watched; the default) or from a Kubernetes API (one
// process running operator + gateway + engine against a cluster). Stores are in
// memory, or in Redis when a client is given. Same reconcile and gateway code as the
// distributed roles: only the adapters differ.
import type { RedisClient } from '../api/records/redis-client.ts';
import type { ReconcilerOptions } from '../operator/reconcile/reconciler.ts';
import { startReconcileLoop, type ReconcileLoop } from '../operator/reconcile/run.ts';
import { DirectorySource, type ManifestError } from '../operator/sources/directory.ts';
import type { ResourceSource } from '../operator/sources/ports.ts';
import type { RouteStore, WorkflowRegistry } from '../api/records/records.ts';
import type { InProcessEngine } from '../runtime/engine/engine.ts';
import {
  createServing,
  createStores,
  inProcessEngine,
  type Serving,
  type ServingOptions,
} from './serving.ts';

export interface DevOptions extends ServingOptions {
  /** Folder of manifests (Workflows, WebhookTriggers, Secrets), when no `source` is given. */
  dir?: string;
  /** Where resources come from instead of a folder (e.g. a KubernetesSource). */
  source?: ResourceSource;
  /** Kubernetes Events sink (with a Kubernetes source). */
  recordEvent?: ReconcilerOptions['recordEvent'];
  /** Shared stores in Redis instead of memory. */
  redis?: RedisClient;
  /** The request-path connection to the same Redis (roles/redis.ts). */
  requests?: RedisClient;
}

export interface DevRuntime extends Serving<InProcessEngine> {
  source: ResourceSource;
  /** Manifest problems of a directory source (empty for other sources). */
  manifestErrors(): ManifestError[];
  loop: ReconcileLoop;
  routes: RouteStore;
  workflows: WorkflowRegistry;
}

export async function createDevRuntime(options: DevOptions): Promise<DevRuntime> {
  const stores = createStores(options.redis, options.budgets, options.requests);
  const log = (message: string, fields?: Record<string, unknown>) =>
    options.logger?.warn(fields ?? {}, message);
  const source = options.source ?? new DirectorySource({ dir: options.dir ?? 'examples', log });
  const manifestErrors = () => (source instanceof DirectorySource ? source.errors() : []);
  // A start that fails closes what it had opened (the stores' connections, the loop).
  const loop = await startReconcileLoop({
    source,
    routes: stores.routes,
    workflows: stores.workflows,
    gateways: stores.gateways,
    baseUrl: options.baseUrl,
    ...(options.recordEvent ? { recordEvent: options.recordEvent } : {}),
    // The records swept at start (a manifest removed while nothing ran, with Redis).
    log: (message, fields) => options.logger?.info(fields ?? {}, message),
  }).catch((error: unknown) => {
    stores.close();
    throw error;
  });
  const serving = await createServing(
    options,
    stores,
    inProcessEngine(options.engine, options.budgets),
    {
      source,
      manifestErrors,
    },
  ).catch(async (error: unknown) => {
    // The start's error is the one to tell: one from stopping the loop would hide it,
    // and skip closing the stores.
    await loop.stop(5_000).catch((stopError: unknown) => {
      log('the reconcile loop did not stop after a failed start', { error: String(stopError) });
    });
    stores.close();
    throw error;
  });
  return {
    ...serving,
    source,
    manifestErrors,
    loop,
    routes: stores.routes,
    workflows: stores.workflows,
    async close() {
      serving.startDraining();
      // The control loop first (so this gateway leaving is not written as status),
      // then traffic (the app drains), then the shared state.
      await loop.stop(5_000);
      await serving.close();
      stores.close();
    },
  };
}
