// `hookgate worker`: runs the executions that gateways queue in Redis. Any number of
// replicas share the queue through one consumer group; each runs up to `concurrency`
// executions at once and exposes execution and callback metrics.
import { CachedRecordReader } from '../api/records/cached-reader.ts';
import type { RedisClient } from '../api/records/redis-client.ts';
import { duplicateWith } from './redis.ts';
import { Registry } from 'prom-client';
import { GatewayMetrics } from '../runtime/analytics/metrics.ts';
import { InProcessEngine, type InProcessEngineOptions } from '../runtime/engine/engine.ts';
import { forgetGoneSeries } from '../runtime/analytics/forget-series.ts';
import { storeMetrics } from '../runtime/analytics/store-metrics.ts';
import type { Budgets } from './budget-settings.ts';
import { deadLettersDropped, executionLayout, redisExecutionStore } from './serving.ts';
import { RedisDeadLetterStore } from '../runtime/engine/dead-letters-redis.ts';
import { readQueueState, type QueueState } from '../runtime/engine/queue-state.ts';
import { RedisRetryQueue } from '../runtime/engine/retry-queue-redis.ts';
import { ExecutionWorker, type ExecutionWorkerOptions } from '../runtime/engine/worker.ts';
import type { RouteRecord, WorkflowRegistration } from '../api/records/records.ts';
import { REDIS_KEYS, RedisRecordStore } from '../api/records/redis-store.ts';
import { outputValidatorFor } from '../runtime/engine/output-validator.ts';
import { RedisSampleStore } from '../runtime/schema-learning/samples-redis.ts';
import { SampleRecorder } from '../runtime/schema-learning/recorder.ts';
import { learningOutputValidator } from '../runtime/schema-learning/output.ts';

export interface WorkerRuntimeOptions {
  redis: RedisClient;
  engine?: Omit<InProcessEngineOptions, 'store' | 'streamEvents' | 'observer'>;
  /** Executions run at once. Default 32. */
  concurrency?: number;
  /** Shards of the queue (HOOKGATE_QUEUE_SHARDS), as on the gateways. Default 1. */
  queueShards?: number;
  claimIdleMs?: number;
  blockMs?: number;
  /** The Redis command timeout (HOOKGATE_REDIS_COMMAND_TIMEOUT_MS); bounds blocking reads too. */
  commandTimeoutMs?: number;
  consumer?: string;
  /** Byte budgets and record lifetime of the executions store. */
  budgets?: Budgets;
  /** Where failures outside any one execution are reported (the role's logger). */
  onInternalError?: (error: unknown, where: string) => void;
}

export interface WorkerRuntime {
  registry: Registry;
  engine: InProcessEngine;
  worker: ExecutionWorker;
  close(timeoutMs?: number): Promise<void>;
}

export async function createWorkerRuntime(options: WorkerRuntimeOptions): Promise<WorkerRuntime> {
  const { redis } = options;
  const routes = new RedisRecordStore<RouteRecord>({ redis, key: REDIS_KEYS.routes });
  const workflows = new RedisRecordStore<WorkflowRegistration>({
    redis,
    key: REDIS_KEYS.workflows,
  });
  const routeReader = new CachedRecordReader({ store: routes });
  const workflowReader = new CachedRecordReader({ store: workflows });
  const layout = executionLayout(redis, options.queueShards);
  const store = redisExecutionStore(redis, options.budgets, layout);
  const retries = new RedisRetryQueue({ redis, store });
  // It holds the records of its entries in the store (HeldRecords).
  const deadLetters = new RedisDeadLetterStore({
    redis,
    layout,
    ...(options.budgets?.executionTtlMs ? { ttlMs: options.budgets.executionTtlMs } : {}),
    records: store,
    onDropped: deadLettersDropped(options.onInternalError),
  });
  const registry = new Registry();
  // Read at scrape time (XINFO STREAM and TIME), once for both gauges of a scrape.
  let reading: { at: number; state: Promise<QueueState> } | undefined;
  const queue = (): Promise<QueueState> => {
    const now = Date.now();
    if (!reading || now - reading.at > 500)
      reading = { at: now, state: readQueueState(redis, layout.streams) };
    return reading.state;
  };
  const metrics = new GatewayMetrics({
    registry,
    queueDepth: () => queue().then((s) => s.depth),
    queueOldestAge: () => queue().then((s) => s.oldestAgeSeconds),
    deadLetters: () => deadLetters.count(),
  });
  storeMetrics(registry, [store, deadLetters]);
  const concurrency = options.concurrency ?? 32;
  const engine = new InProcessEngine({
    // A callback signs each attempt with the secrets its trigger's route holds then.
    routes: routeReader,
    ...options.engine,
    ...(options.onInternalError ? { onInternalError: options.onInternalError } : {}),
    concurrency,
    store,
    streamEvents: true,
    retries,
    deadLetters,
    observer: metrics.engineObserver(),
  });
  // Its XREADGROUP BLOCK waits longer than any command may: no command timeout, but
  // ioredis' blocking timeout (the BLOCK time plus a grace) as a bound on a dead
  // connection that never reports its end.
  const blocking = duplicateWith(redis, {
    commandTimeout: undefined,
    blockingTimeout: options.commandTimeoutMs ?? 1_000,
  });
  const workerOptions: ExecutionWorkerOptions = {
    redis,
    blocking,
    engine,
    store,
    retries,
    deadLetters,
    concurrency,
    // Read at run time, so a job runs what is deployed and published now (kept in
    // memory between announced changes: api/records/cached-reader.ts; the route from
    // the store itself when asked, before a job is failed as one of a re-created trigger).
    resolve: async (job, uncached) => {
      const [route, workflow] = await Promise.all([
        (uncached ? routes : routeReader).get(job.triggerKey),
        workflowReader.get(job.workflowId),
      ]);
      return route && workflow ? { route, workflow } : undefined;
    },
    // Workers record the responses of triggers that learn their schema (the gateways
    // record the requests), in the same Redis.
    outputValidator: learningOutputValidator(
      new SampleRecorder({
        store: new RedisSampleStore({ redis }),
        onError: (error) => options.onInternalError?.(error, 'schema learning: recording a sample'),
      }),
      outputValidatorFor,
    ),
    ...(options.claimIdleMs !== undefined ? { claimIdleMs: options.claimIdleMs } : {}),
    ...(options.blockMs !== undefined ? { blockMs: options.blockMs } : {}),
    ...(options.consumer !== undefined ? { consumer: options.consumer } : {}),
    ...(options.onInternalError ? { onInternalError: options.onInternalError } : {}),
  };
  const worker = new ExecutionWorker(workerOptions);
  await worker.start();
  // The executions series of workflows no longer published go (no routes here). The
  // registry's keys are the workflow ids: HKEYS, not every workflow's spec read and
  // parsed by every worker every minute.
  const stopForgetting = forgetGoneSeries(metrics, async () => ({
    routes: new Set<string>(),
    workflows: new Set(await workflows.keys()),
  }));
  return {
    registry,
    engine,
    worker,
    async close(timeoutMs) {
      stopForgetting();
      await worker.close(timeoutMs);
      routeReader.close();
      workflowReader.close();
      routes.close();
      workflows.close();
    },
  };
}
