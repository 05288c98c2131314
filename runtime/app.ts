// The public listener: the webhook gateway (/webhook/*) and whatever plugins a role
// adds there (probes and metrics). Nothing else: the read API, Send Test Request, the
// dashboard and the live streams are on the admin listener (admin/app.ts), so this
// listener answers 404 for /api/* whatever the admin side's authentication.
// The one exception is an execution's own public links (/webhook-executions/<id>,
// gateway/execution-links.ts), which need the token the caller got in its 202.
// Every answer here is sandboxed (CSP sandbox, nosniff; gateway/response-headers.ts).
// Listening and shutting down belong to the roles (roles/).
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { ExecutionEngine } from './engine/ports.ts';
import type { TraceContextPolicy } from './engine/outbound/trace-context.ts';
import type { LiveEventHub } from './gateway/live-events.ts';
import type { RequestObserver } from './gateway/observations.ts';
import type { IdempotencyOptions } from './gateway/idempotency/claims.ts';
import type { ModeDeps } from './gateway/response-modes.ts';
import type { RouteTable } from './gateway/route-table.ts';
import { webhookRoutes, type Guards } from './gateway/webhook-routes.ts';
import { executionLinkRoutes } from './gateway/execution-links.ts';
import { SANDBOX_HEADERS } from './gateway/response-headers.ts';
import type { SampleRecorder } from './schema-learning/recorder.ts';
import type { Tracing } from './tracing/tracing.ts';
import { createHttpApp, registerPlugins, type AppPlugin, type ServerLimits } from './http-app.ts';
import type { ProcessStreams } from './gateway/sse.ts';

export { SERVER_LIMITS, type ServerLimits } from './http-app.ts';

export interface AppOptions {
  table: RouteTable;
  engine: ExecutionEngine;
  guards: Guards;
  live: LiveEventHub;
  modes?: Partial<ModeDeps>;
  idempotency?: IdempotencyOptions;
  observer?: RequestObserver;
  /** Throws (503) while the store every webhook needs is down: checked before the body is read. */
  storeCheck?: () => void;
  /** Schema learning: records sample request bodies of triggers that learn. */
  samples?: SampleRecorder;
  /** More routes: metrics and probes. Each runs in its own encapsulated scope. */
  plugins?: AppPlugin[];
  /** The role's logger (none by default). Per-request lines are logged at debug level. */
  logger?: FastifyBaseLogger;
  heartbeatMs?: number;
  /** Server timeouts and limits (tests shorten them). */
  limits?: Partial<ServerLimits>;
  /** The process's open streams, shared with its other listener (default: its own). */
  streams?: ProcessStreams;
  /** Whose W3C trace context goes on to what executions call (default: authenticated). */
  traceContext?: TraceContextPolicy;
  /** Distributed tracing (ADR 0040); off when absent. */
  tracing?: Tracing;
}

export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const { app, limits } = createHttpApp(options);
  // Every answer is sandboxed, before any route or refusal sets more: a workflow's body
  // never runs in the origin the listener shares with other tenants and with the admin
  // listener (docs/security.md, "Response headers").
  app.addHook('onRequest', (_request, reply, done) => {
    reply.headers(SANDBOX_HEADERS);
    done();
  });
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
      ...(options.storeCheck ? { storeCheck: options.storeCheck } : {}),
      ...(options.samples ? { samples: options.samples } : {}),
      ...(options.traceContext ? { traceContext: options.traceContext } : {}),
      ...(options.tracing ? { tracing: options.tracing } : {}),
    });
    done();
  });
  await app.register((scope, _opts, done) => {
    executionLinkRoutes(scope, {
      engine: options.engine,
      table: options.table,
      ...(options.heartbeatMs ? { heartbeatMs: options.heartbeatMs } : {}),
    });
    done();
  });
  await registerPlugins(app, options.plugins ?? []);
  return app;
}
