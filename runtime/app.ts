// Builds the HTTP application: the webhook gateway, the live event stream, the
// executions and admin APIs, health endpoints, plus whatever plugins a role adds
// (metrics, analytics, dashboard). Creating, listening and shutting down live in
// server.ts; this file only wires parts together.
import { createServer } from 'node:http';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { executionRoutes } from './read-api/execution-routes.ts';
import { resourceRoutes, type ResourceReader } from './read-api/resource-routes.ts';
import { testRequestRoutes } from './read-api/test-request-routes.ts';
import type { ExecutionEngine } from './engine/ports.ts';
import { liveEventRoutes, type LiveEventHub } from './gateway/live-events.ts';
import type { RequestObserver } from './gateway/observations.ts';
import { installProblemHandlers } from './gateway/problem-handler.ts';
import { installSse } from './gateway/sse.ts';
import type { IdempotencyOptions } from './gateway/idempotency/claims.ts';
import type { ModeDeps } from './gateway/response-modes.ts';
import type { RouteTable } from './gateway/route-table.ts';
import { webhookRoutes, type Guards } from './gateway/webhook-routes.ts';

export interface AppOptions {
  table: RouteTable;
  engine: ExecutionEngine;
  guards: Guards;
  live: LiveEventHub;
  modes?: Partial<ModeDeps>;
  idempotency?: IdempotencyOptions;
  observer?: RequestObserver;
  /** Where resources come from, for the admin API. */
  source?: ResourceReader;
  manifestErrors?: () => unknown[];
  /** More routes: metrics, analytics, dashboard. Each runs in its own encapsulated scope. */
  plugins?: ((app: FastifyInstance) => void | Promise<void>)[];
  logger?: FastifyServerOptions['logger'];
  /** Whether the role is ready to serve (readiness probe). */
  ready?: () => boolean;
  heartbeatMs?: number;
  /** Server timeouts and limits (tests shorten them). */
  limits?: Partial<ServerLimits>;
}

/** Server-wide limits (slow clients, idle sockets); see docs/security.md. */
export const SERVER_LIMITS = {
  /** Time to receive a whole request (Node's default of 300 s is off under Fastify). */
  requestTimeout: 120_000,
  /** Time to receive the request headers: a client trickling them is cut off. */
  headersTimeout: 60_000,
  /** Above common load balancers' 60 s idle timeout, so they close first. */
  keepAliveTimeout: 72_000,
  /** How often Node checks the two timeouts above. */
  connectionsCheckingInterval: 5_000,
  /** The largest body any endpoint may accept (each endpoint sets its own lower limit). */
  bodyLimit: 16 * 1024 * 1024,
};
export type ServerLimits = typeof SERVER_LIMITS;

export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const limits = { ...SERVER_LIMITS, ...options.limits };
  const app = Fastify({
    logger: options.logger ?? false,
    // Our own server, so that every slow-client timeout is set explicitly (G6).
    serverFactory: (handler) =>
      createServer(
        {
          requestTimeout: limits.requestTimeout,
          headersTimeout: limits.headersTimeout,
          keepAliveTimeout: limits.keepAliveTimeout,
          connectionsCheckingInterval: limits.connectionsCheckingInterval,
        },
        handler,
      ),
    requestTimeout: limits.requestTimeout,
    keepAliveTimeout: limits.keepAliveTimeout,
    bodyLimit: limits.bodyLimit,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    routerOptions: { maxParamLength: 500 },
  });
  installProblemHandlers(app);
  installSse(app);

  await app.register((scope, _opts, done) => {
    webhookRoutes(scope, {
      table: options.table,
      engine: options.engine,
      guards: options.guards,
      live: options.live,
      maxBodyBytes: limits.bodyLimit,
      ...(options.modes ? { modes: { ...options.modes, heartbeatMs: options.heartbeatMs } } : {}),
      ...(options.observer ? { observer: options.observer } : {}),
      ...(options.idempotency ? { idempotency: options.idempotency } : {}),
    });
    done();
  });
  liveEventRoutes(app, {
    hub: options.live,
    findRoute: (path) => options.table.match(path)?.route,
    ...(options.heartbeatMs ? { heartbeatMs: options.heartbeatMs } : {}),
  });
  executionRoutes(app, {
    engine: options.engine,
    ...(options.heartbeatMs ? { heartbeatMs: options.heartbeatMs } : {}),
  });
  testRequestRoutes(app, { routes: options.table.routes });
  if (options.source) {
    resourceRoutes(app, {
      source: options.source,
      ...(options.manifestErrors ? { manifestErrors: options.manifestErrors } : {}),
    });
  }
  app.get('/healthz', () => ({ status: 'ok' }));
  app.get('/readyz', (_request, reply) => {
    const ready = options.ready?.() ?? true;
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'starting' });
  });
  for (const plugin of options.plugins ?? []) {
    await app.register(async (scope) => {
      await plugin(scope);
    });
  }
  return app;
}
