// `hookgate dev`: every role in one process. Manifests come from a directory
// (watched), stores are in memory, the engine runs in-process. Same reconcile and
// gateway code as the distributed roles: only the adapters differ.
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import { startReconcileLoop, type ReconcileLoop } from '../../operator/reconcile/run.ts';
import { DirectorySource } from '../../operator/sources/directory.ts';
import { buildApp, type AppOptions } from '../app.ts';
import { InProcessEngine, type InProcessEngineOptions } from '../engine/engine.ts';
import { validateCallbackUrl } from '../engine/callbacks.ts';
import { MemoryIdempotencyStore } from '../engine/idempotency.ts';
import { createGuards, type GuardOptions } from '../gateway/guards.ts';
import { LiveEventHub } from '../gateway/live-events.ts';
import { RouteTable } from '../gateway/route-table.ts';
import { MemoryRecordStore } from '../stores/memory.ts';
import type { RouteRecord, WorkflowRegistration } from '../stores/ports.ts';

export interface DevOptions {
  /** Folder of manifests (Workflows, WebhookTriggers, Secrets). */
  dir: string;
  /** Public base URL used in status.url. */
  baseUrl: string;
  logger?: FastifyServerOptions['logger'];
  engine?: InProcessEngineOptions;
  guards?: GuardOptions;
  heartbeatMs?: number;
  limits?: AppOptions['limits'];
}

export interface DevRuntime {
  app: FastifyInstance;
  source: DirectorySource;
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
  const source = new DirectorySource({ dir: options.dir, log });
  const loop = await startReconcileLoop({ source, routes, workflows, baseUrl: options.baseUrl });
  const table = await RouteTable.create(routes, workflows, log);
  const engine = new InProcessEngine(options.engine);
  const guards = createGuards({ sameOrigin: new URL(options.baseUrl).origin, ...options.guards });
  const app = await buildApp({
    table,
    engine,
    guards,
    live: new LiveEventHub(),
    source,
    manifestErrors: () => source.errors(),
    idempotency: { store: new MemoryIdempotencyStore() },
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
