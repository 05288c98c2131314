// The set-up the Redis queue suites share (queue.test.ts, retry-queue.test.ts): a
// backend started once per suite and flushed before each test, gateways (QueuedEngine)
// and workers (ExecutionWorker over an in-process engine) on connections of their own,
// everything closed after each test. Call inside a describe block: it registers hooks.
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { shardedSubscriberClient, type RedisClient } from '../../api/records/redis-client.ts';
import type { DeadLetterStore } from '../../runtime/engine/dead-letters.ts';
import { RedisDeadLetterStore } from '../../runtime/engine/dead-letters-redis.ts';
import { InProcessEngine } from '../../runtime/engine/engine.ts';
import { RedisExecutionEvents } from '../../runtime/engine/execution-events-redis.ts';
import { ExecutionLayout } from '../../runtime/engine/execution-keys.ts';
import { RedisExecutionStore } from '../../runtime/engine/execution-store-redis.ts';
import { QueuedEngine } from '../../runtime/engine/queued-engine.ts';
import { readQueueState } from '../../runtime/engine/queue-state.ts';
import { RedisRetryQueue } from '../../runtime/engine/retry-queue-redis.ts';
import {
  ExecutionWorker,
  type ExecutionWorkerOptions,
  type JobTarget,
} from '../../runtime/engine/worker.ts';
import type { RedisBackend } from '../support/redis-backends.ts';

export interface WorkerOptions {
  consumer?: string;
  claimIdleMs?: number;
  forgetIdleMs?: number;
  concurrency?: number;
  /** Jobs read beyond the free slots while namespaces mix (ADR 0049; worker default). */
  lookahead?: number;
  /** Runs the jobs instead of the engine the harness makes. */
  engine?: InProcessEngine;
  /** Retries through the Redis retry queue and dead letters in Redis (retryPollMs 50). */
  retries?: boolean;
  /** What the worker reports (default: nothing is kept). */
  onInternalError?: (error: unknown, where: string) => void;
  /** Where the worker adds the entry of a job whose record says dead-lettered. */
  deadLetters?: DeadLetterStore;
  /** Resolves jobs instead of `targets`. */
  resolve?: ExecutionWorkerOptions['resolve'];
}

export interface QueueHarness {
  readonly backend: RedisBackend;
  readonly layout: ExecutionLayout;
  /** What the workers resolve a job's trigger key to; emptied before each test. */
  readonly targets: Map<string, JobTarget>;
  /** A new connection, closed after the test. */
  readonly client: () => RedisClient;
  /** Runs after the test, before the connections close (the last added first). */
  readonly closeAfter: (close: () => Promise<void> | void) => void;
  /** Jobs in every shard's stream. */
  readonly depth: (redis: RedisClient) => Promise<number>;
  /**
   * The executions' lifetime of the stores made from now on, dead letters' too (default:
   * the stores').
   */
  storeTtlMs: number | undefined;
  readonly gateway: (options?: { maxQueued?: number; depthEveryMs?: number }) => {
    engine: QueuedEngine;
    store: RedisExecutionStore;
    events: RedisExecutionEvents;
    deadLetters: RedisDeadLetterStore;
  };
  readonly worker: (options?: WorkerOptions) => ExecutionWorker;
}

export function redisQueueHarness(
  start: () => Promise<RedisBackend>,
  shards: number,
): QueueHarness {
  let backend: RedisBackend | undefined;
  let layout: ExecutionLayout | undefined;
  let targets = new Map<string, JobTarget>();
  let storeTtlMs: number | undefined;
  const storeOf = (redis: RedisClient) =>
    new RedisExecutionStore({
      redis,
      layout: harness.layout,
      ...(storeTtlMs === undefined ? {} : { ttlMs: storeTtlMs }),
    });
  // Dead letters live as long as the executions, and hold their records in the store, as
  // the roles make them (roles/serving.ts, roles/worker.ts).
  const deadLettersOf = (redis: RedisClient, store: RedisExecutionStore) =>
    new RedisDeadLetterStore({
      redis,
      layout: harness.layout,
      ...(storeTtlMs === undefined ? {} : { ttlMs: storeTtlMs }),
      records: store,
    });
  const clients: RedisClient[] = [];
  const closers: (() => Promise<void> | void)[] = [];

  beforeAll(async () => {
    backend = await start();
    layout = new ExecutionLayout({ shards, cluster: backend.client.isCluster });
  }, 60_000);
  afterAll(async () => {
    await backend?.stop();
  });
  beforeEach(async () => {
    targets = new Map();
    storeTtlMs = undefined;
    await harness.backend.flushall();
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    for (const c of clients.splice(0)) c.disconnect();
  });

  const harness: QueueHarness = {
    get backend() {
      if (!backend) throw new Error('the Redis backend is not started (use inside a test)');
      return backend;
    },
    get layout() {
      if (!layout) throw new Error('the Redis backend is not started (use inside a test)');
      return layout;
    },
    get targets() {
      return targets;
    },
    get storeTtlMs() {
      return storeTtlMs;
    },
    set storeTtlMs(ms: number | undefined) {
      storeTtlMs = ms;
    },
    client: () => {
      const c = harness.backend.connect();
      clients.push(c);
      return c;
    },
    closeAfter: (close) => {
      closers.push(close);
    },
    depth: async (redis) => (await readQueueState(redis, harness.layout.streams)).depth,
    gateway: (options = {}) => {
      const redis = harness.client();
      const store = storeOf(redis);
      const subscriber = shardedSubscriberClient(redis);
      clients.push(subscriber);
      const events = new RedisExecutionEvents({ subscriber, store });
      const engine = new QueuedEngine({ redis, store, events, ...options });
      closers.push(() => engine.close());
      const deadLetters = deadLettersOf(redis, store);
      return { engine, store, events, deadLetters };
    },
    worker: ({ retries: withRetries = false, ...options } = {}) => {
      const redis = harness.client();
      const store = storeOf(redis);
      const retries = withRetries ? new RedisRetryQueue({ redis, store }) : undefined;
      const deadLetters = withRetries ? deadLettersOf(redis, store) : undefined;
      // As roles/worker.ts makes it: the worker's slots are the engine's.
      const engine = new InProcessEngine({
        concurrency: options.concurrency ?? 32,
        store,
        streamEvents: true,
        ...(retries ? { retries } : {}),
        ...(deadLetters ? { deadLetters } : {}),
        onInternalError: () => {},
      });
      const w = new ExecutionWorker({
        redis,
        blocking: harness.client(),
        engine,
        store,
        ...(retries ? { retries, retryPollMs: 50 } : {}),
        ...(deadLetters ? { deadLetters } : {}),
        resolve: (job) => Promise.resolve(targets.get(job.triggerKey)),
        blockMs: 200,
        onInternalError: () => {},
        ...options,
      });
      closers.push(() => w.close(2_000));
      return w;
    },
  };
  return harness;
}
