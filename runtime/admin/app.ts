// The admin listener: the read API (triggers, workflows, executions with their logs
// and events, OpenAPI documents, schema proposals of learning triggers), Send Test Request, the analytics API, the dashboard and the live event
// stream. Every /api and /webhook-events request is authenticated and authorised by
// `access` (access.ts); the dashboard's static files are public (they hold no data).
// Test requests go through the webhook app in-process, never over the network.
import { sendContinue } from '../gateway/client-errors.ts';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { ExecutionEngine } from '../engine/ports.ts';
import { liveEventRoutes, type LiveEventHub } from '../gateway/live-events.ts';
import type { RouteTable } from '../gateway/route-table.ts';
import { createHttpApp, registerPlugins, type AppPlugin, type ServerLimits } from '../http-app.ts';
import type { ProcessStreams } from '../gateway/sse.ts';
import type { DeadLetterStore } from '../engine/dead-letters.ts';
import type { IdempotencyStore } from '../gateway/idempotency/store.ts';
import { executionRoutes } from '../read-api/execution-routes.ts';
import { recoveryRoutes } from '../read-api/recovery-routes.ts';
import { openApiRoutes } from '../read-api/openapi-routes.ts';
import { resourceRoutes, type ResourceReader } from '../read-api/resource-routes.ts';
import { testRequestRoutes } from '../read-api/test-request-routes.ts';
import { schemaProposalRoutes } from '../read-api/schema-proposal-routes.ts';
import type { SampleStore } from '../schema-learning/samples.ts';
import { OPEN_ACCESS, readTrigger, type AdminAccess } from './access.ts';

export interface AdminAppOptions {
  /** The webhook app: Send Test Request injects into it. */
  webhooks: FastifyInstance;
  table: RouteTable;
  engine: ExecutionEngine;
  live: LiveEventHub;
  /** The dead-letter list; without it, no recovery endpoints (replay included). */
  deadLetters?: DeadLetterStore;
  /** Told how many dead letters an admin call retried (metrics). */
  deadLettersRetried?: (count: number) => void;
  /** Where a replay's Idempotency-Key is kept (the webhooks' store); default: this process's. */
  idempotency?: IdempotencyStore;
  /** Who may do what; everything allowed by default (the dev server on loopback). */
  access?: AdminAccess;
  /** The samples of learning triggers; without it, no schema-proposal endpoints. */
  samples?: SampleStore;
  /** Where resources come from (the embedded control plane); no resource API without. */
  source?: ResourceReader;
  manifestErrors?: () => unknown[];
  /** Analytics API and dashboard. Their /api routes need a cluster-wide `list`. */
  plugins?: AppPlugin[];
  logger?: FastifyBaseLogger;
  heartbeatMs?: number;
  limits?: Partial<ServerLimits>;
  /** The process's open streams, shared with its other listener (default: its own). */
  streams?: ProcessStreams;
  /** Byte budget of one page of GET /api/executions (default 4 MiB). */
  listPageBytes?: number;
  /** The webhook listener's public base URL: the server of the OpenAPI documents. */
  baseUrl?: string;
}

export async function buildAdminApp(options: AdminAppOptions): Promise<FastifyInstance> {
  const { app } = createHttpApp({ ...options, listener: 'admin' });
  const access = options.access ?? OPEN_ACCESS;
  access.install(app);
  // 100 Continue once the request is authenticated (onRequest), as the body is parsed.
  app.addHook('preParsing', (request, _reply, payload, done) => {
    sendContinue(request.raw);
    done(null, payload);
  });
  const heartbeat = options.heartbeatMs ? { heartbeatMs: options.heartbeatMs } : {};
  liveEventRoutes(app, {
    hub: options.live,
    findRoute: (path) => options.table.match(path)?.route,
    authorize: (request, route) => access.require(request, readTrigger(route.key)),
    recheck: (request, route, revoked) => access.watch(request, readTrigger(route.key), revoked),
    ...heartbeat,
  });
  executionRoutes(app, {
    engine: options.engine,
    access,
    ...heartbeat,
    ...(options.listPageBytes ? { pageBytes: options.listPageBytes } : {}),
  });
  testRequestRoutes(app, { routes: options.table.routes, webhooks: options.webhooks, access });
  if (options.samples) {
    schemaProposalRoutes(app, { routes: options.table.routes, samples: options.samples, access });
  }
  if (options.deadLetters) {
    const { table } = options;
    recoveryRoutes(app, {
      engine: options.engine,
      routes: table.routes,
      workflow: (id) => table.workflow(id),
      deadLetters: options.deadLetters,
      access,
      ...(options.deadLettersRetried ? { retried: options.deadLettersRetried } : {}),
      ...(options.idempotency ? { idempotency: { store: options.idempotency } } : {}),
    });
  }
  openApiRoutes(app, {
    routes: options.table.routes,
    baseUrl: options.baseUrl ?? 'http://localhost:8080',
    access,
  });
  if (options.source) {
    resourceRoutes(app, {
      source: options.source,
      access,
      ...(options.manifestErrors ? { manifestErrors: options.manifestErrors } : {}),
    });
  }
  // Analytics span every namespace: reading them needs a cluster-wide `list`.
  await registerPlugins(
    app,
    (options.plugins ?? []).map((plugin) => async (scope: FastifyInstance) => {
      scope.addHook('preHandler', async (request) => {
        if (request.routeOptions.url?.startsWith('/api/'))
          await access.require(request, { verb: 'list', resource: 'webhooktriggers' });
      });
      await plugin(scope);
    }),
  );
  return app;
}
