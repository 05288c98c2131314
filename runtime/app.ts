// Builds the HTTP application: the webhook gateway, the live event stream, the
// executions and read APIs, plus whatever plugins a role adds (probes and metrics,
// analytics, dashboard). Listening and shutting down belong to the roles (roles/);
// this file only wires parts together.
import { createServer } from 'node:http';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
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
  /** The role's logger (none by default). Per-request lines are logged at debug level. */
  logger?: FastifyBaseLogger;
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

/**
 * Fastify's two lines per request (received, completed) at debug level instead of
 * info: at info a short load test wrote hundreds of thousands of lines.
 */
class RequestLogsAtDebug extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    request.log.debug({ req: request }, 'incoming request');
  }

  override requestCompleted(
    _error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    request.log.debug({ res: reply, responseTime: reply.elapsedTime }, 'request completed');
  }
}

export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const limits = { ...SERVER_LIMITS, ...options.limits };
  const app = Fastify({
    ...(options.logger ? { loggerInstance: options.logger } : { logger: false }),
    logController: new RequestLogsAtDebug(),
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
  for (const plugin of options.plugins ?? []) {
    await app.register(async (scope) => {
      await plugin(scope);
    });
  }
  return app;
}
