// `hookgate dev`: every role in one process, stores in memory, the engine in-process.
// Resources come from a manifest directory (watched; the default) or from a
// Kubernetes API (one process running operator + gateway + engine against a cluster).
// Same reconcile and gateway code as the distributed roles: only the adapters differ.
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import type { ReconcilerOptions } from '../../operator/reconcile/reconciler.ts';
import { startReconcileLoop, type ReconcileLoop } from '../../operator/reconcile/run.ts';
import { DirectorySource, type ManifestError } from '../../operator/sources/directory.ts';
import type { ResourceSource } from '../../operator/sources/ports.ts';
import { buildApp, type AppOptions } from '../app.ts';
import { InProcessEngine, type InProcessEngineOptions } from '../engine/engine.ts';
import { validateCallbackUrl } from '../engine/callbacks.ts';
import { MemoryIdempotencyStore } from '../engine/idempotency.ts';
import { createAnalytics, type AnalyticsBackendConfig } from '../analytics/wiring.ts';
import { createGuards, type GuardOptions } from '../gateway/guards.ts';
import { LiveEventHub } from '../gateway/live-events.ts';
import { RouteTable } from '../gateway/route-table.ts';
import { MemoryRecordStore } from '../stores/memory.ts';
import type { RouteRecord, WorkflowRegistration } from '../stores/ports.ts';

export interface DevOptions {
  /** Folder of manifests (Workflows, WebhookTriggers, Secrets), when no `source` is given. */
  dir?: string;
  /** Where resources come from instead of a folder (e.g. a KubernetesSource). */
  source?: ResourceSource;
  /** Public base URL used in status.url. */
  baseUrl: string;
  logger?: FastifyServerOptions['logger'];
  engine?: InProcessEngineOptions;
  guards?: GuardOptions;
  heartbeatMs?: number;
  limits?: AppOptions['limits'];
  /** Kubernetes Events sink (with a Kubernetes source). */
  recordEvent?: ReconcilerOptions['recordEvent'];
  /** Analytics backend: the in-process store (default) or Prometheus. */
  analytics?: AnalyticsBackendConfig;
}

export interface DevRuntime {
  app: FastifyInstance;
  source: ResourceSource;
  /** Manifest problems of a directory source (empty for other sources). */
  manifestErrors(): ManifestError[];
  loop: ReconcileLoop;
  engine: InProcessEngine;
  table: RouteTable;
  routes: MemoryRecordStore<RouteRecord>;
  workflows: MemoryRecordStore<WorkflowRegistration>;
  /** Stop taking work, drain, and release everything. */
  close(): Promise<void>;
}

export async function createDevRuntime(options: DevOptions): Promise<DevRuntime> {
  const routes = new MemoryRecordStore<RouteRecord>();
  const workflows = new MemoryRecordStore<WorkflowRegistration>();
  const log = (message: string, fields?: Record<string, unknown>) => {
    if (options.logger) console.error(JSON.stringify({ level: 'warn', msg: message, ...fields }));
  };
  const source = options.source ?? new DirectorySource({ dir: options.dir ?? 'examples', log });
  const manifestErrors = () => (source instanceof DirectorySource ? source.errors() : []);
  const loop = await startReconcileLoop({
    source,
    routes,
    workflows,
    baseUrl: options.baseUrl,
    ...(options.recordEvent ? { recordEvent: options.recordEvent } : {}),
  });
  const table = await RouteTable.create(routes, workflows, log);
  // The queue-depth gauge reads the engine, which reports to the metrics: each is
  // used by the other only after both exist.
  const analytics = createAnalytics({
    backend: options.analytics ?? { kind: 'memory' },
    queueDepth: () => engine.queued,
  });
  const engine: InProcessEngine = new InProcessEngine({
    ...options.engine,
    observer: {
      executionFinished: (e) =>
        analytics.metrics.recordExecution(
          e.workflowId,
          e.status === 'succeeded' ? 'succeeded' : 'failed',
        ),
      callbackDelivered: (r) =>
        analytics.metrics.recordCallbackDelivery(r.delivered ? 'delivered' : 'failed'),
    },
  });
  const guards = createGuards({
    sameOrigin: new URL(options.baseUrl).origin,
    onRateLimit: (decision) => analytics.metrics.recordRateLimitDecision(decision),
    ...options.guards,
  });
  const app = await buildApp({
    table,
    engine,
    guards,
    live: new LiveEventHub(),
    source,
    manifestErrors,
    idempotency: { store: new MemoryIdempotencyStore() },
    observer: analytics.observer,
    plugins: analytics.plugins,
    modes: {
      validateCallbackUrl: (url) => validateCallbackUrl(url, engine.callbacks.guard),
    },
    ...(options.logger !== undefined ? { logger: options.logger } : {}),
    ...(options.heartbeatMs ? { heartbeatMs: options.heartbeatMs } : {}),
    ...(options.limits ? { limits: options.limits } : {}),
  });
  return {
    app,
    source,
    manifestErrors,
    loop,
    engine,
    table,
    routes,
    workflows,
    async close() {
      await app.close();
      await loop.stop(5_000);
      table.close();
      await engine.close(5_000);
    },
  };
}
