// The serving half of a process: route table over the stores, engine, protections,
// analytics and the HTTP app. The dev role adds a resource source and the reconcile
// loop in front of it; the gateway role serves what an operator wrote to Redis.
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { CachedRecordReader } from '../api/records/cached-reader.ts';
import { shardedSubscriberClient, type RedisClient } from '../api/records/redis-client.ts';
import { duplicateWith } from './redis.ts';
import type { ResourceSource } from '../operator/sources/ports.ts';
import { createAnalytics, type AnalyticsBackendConfig } from '../runtime/analytics/wiring.ts';
import type { GatewayMetrics } from '../runtime/analytics/metrics.ts';
import type { AdminAccess } from '../runtime/admin/access.ts';
import { buildAdminApp } from '../runtime/admin/app.ts';
import { buildApp, SERVER_LIMITS, type AppOptions } from '../runtime/app.ts';
import { validateCallbackUrl } from '../runtime/engine/callbacks.ts';
import { StoreUnavailableError } from '../runtime/errors.ts';
import {
  InProcessEngine,
  type EngineObserver,
  type InProcessEngineOptions,
} from '../runtime/engine/engine.ts';
import {
  holdsRecords,
  MemoryDeadLetterStore,
  type DeadLetterDropReason,
  type DeadLetterStore,
} from '../runtime/engine/dead-letters.ts';
import { RedisDeadLetterStore } from '../runtime/engine/dead-letters-redis.ts';
import { RedisExecutionEvents } from '../runtime/engine/execution-events-redis.ts';
import { RedisExecutionStore } from '../runtime/engine/execution-store-redis.ts';
import { ExecutionLayout } from '../runtime/engine/execution-keys.ts';
import { OutboundGuard } from '../runtime/engine/outbound/guard.ts';
import type { ExecutionEngine } from '../runtime/engine/ports.ts';
import { QueuedEngine } from '../runtime/engine/queued-engine.ts';
import {
  ReplicaAcks,
  type ReplicaAckCounts,
  type ReplicaAcksOptions,
} from '../runtime/engine/replica-acks.ts';
import {
  MemoryIdempotencyStore,
  type IdempotencyStore,
} from '../runtime/gateway/idempotency/store.ts';
import { RedisIdempotencyStore } from '../runtime/gateway/idempotency/redis-store.ts';
import {
  MemoryReplayStore,
  type ReplayStore,
} from '../runtime/gateway/security/auth/signature/replay.ts';
import { RedisReplayStore } from '../runtime/gateway/security/auth/signature/replay-redis.ts';
import { createGuards, type GuardOptions } from '../runtime/gateway/guards.ts';
import { LiveEventHub } from '../runtime/gateway/live-events.ts';
import { ProcessStreams, sseBuffers } from '../runtime/gateway/sse.ts';
import { RedisLiveEventBus } from '../runtime/gateway/live-events-redis.ts';
import { GatewayReporter } from '../runtime/gateway/reporter.ts';
import { RouteTable } from '../runtime/gateway/route-table.ts';
import { EndpointRateLimiter } from '../runtime/gateway/security/rate-limit.ts';
import type { GatewayStore } from '../api/records/gateways.ts';
import { MemoryGatewayStore } from '../api/records/gateways-memory.ts';
import { RedisGatewayStore } from '../api/records/gateways-redis.ts';
import { MemoryRecordStore } from '../api/records/memory-store.ts';
import type {
  RouteRecord,
  RouteStore,
  WorkflowRegistration,
  WorkflowRegistry,
} from '../api/records/records.ts';
import { REDIS_KEYS, RedisRecordStore } from '../api/records/redis-store.ts';
import { probes, type Readiness } from './probes.ts';
import type { BoundedStore } from '../runtime/bounded.ts';
import { storeMetrics } from '../runtime/analytics/store-metrics.ts';
import { streamMetrics } from '../runtime/analytics/stream-metrics.ts';
import { forgetGoneSeries } from '../runtime/analytics/forget-series.ts';
import { MemoryExecutionStore } from '../runtime/engine/execution-store.ts';
import type { Budgets } from './budget-settings.ts';
import { outputValidatorFor } from '../runtime/engine/output-validator.ts';
import { MemorySampleStore, type SampleStore } from '../runtime/schema-learning/samples.ts';
import { RedisSampleStore } from '../runtime/schema-learning/samples-redis.ts';
import { SampleRecorder } from '../runtime/schema-learning/recorder.ts';
import { learningOutputValidator } from '../runtime/schema-learning/output.ts';

export interface ServingOptions {
  /** Public base URL (status.url, same-origin browser calls). */
  baseUrl: string;
  /** The role's logger; silent when omitted (tests). */
  logger?: FastifyBaseLogger;
  /** Readiness of the role (the /readyz probe); always ready by default. */
  readiness?: () => Readiness;
  /**
   * Serve /metrics on the public listener (default). Off when a listener of its own
   * (METRICS_PORT) serves it; the probes stay on both.
   */
  publicMetrics?: boolean;
  /**
   * Wait for the route table's first load before returning (default). The gateway
   * role does not: with Redis down at start-up it listens, answers liveness and
   * reports not-ready until the routes are loaded.
   */
  waitForRoutes?: boolean;
  /** Options of the in-process engine (the dev role; the gateway with inline executions). */
  engine?: InProcessEngineOptions;
  guards?: GuardOptions;
  heartbeatMs?: number;
  limits?: AppOptions['limits'];
  /** Whose W3C trace context goes on to what executions call (HOOKGATE_TRACE_CONTEXT). */
  traceContext?: AppOptions['traceContext'];
  /** Distributed tracing of requests (ADR 0040; the engine's is in `engine.tracing`). */
  tracing?: AppOptions['tracing'];
  /** Analytics backend: the in-process store (default) or Prometheus. */
  analytics?: AnalyticsBackendConfig;
  /** Byte budgets of what the process keeps (defaults: each store's own). */
  budgets?: Budgets;
  /** Who may use the admin listener; everything allowed when omitted (dev, tests). */
  adminAccess?: AdminAccess;
  /**
   * Request paths refuse at once (503 store-unavailable) while this says the shared
   * store is down: the circuit breaker of the request-path Redis client.
   */
  storeAvailable?: () => boolean;
  /** Seconds in the Retry-After of such a refusal. Default 1. */
  storeRetryAfterSeconds?: number;
  /**
   * The report of what this gateway serves: its id, how long a report counts, and
   * whether it starts once the webhook app listens (a process) or at once (embedded).
   */
  report?: { id?: string; ttlMs?: number; afterListen?: boolean };
}

export interface Stores {
  routes: RouteStore;
  workflows: WorkflowRegistry;
  /** What each gateway serves: gateways write it, the operator reads it. */
  gateways: GatewayStore;
  rateLimiter: EndpointRateLimiter;
  idempotency: IdempotencyStore;
  /** Signed deliveries already accepted (replays are refused). */
  replay: ReplayStore;
  /** Sample bodies and responses of triggers that learn their schema. */
  samples: SampleStore;
  /** With Redis: carries the live event stream between gateways. */
  liveBus?: (gateway: string, log: Log) => Promise<RedisLiveEventBus>;
  close(): void;
}

type Log = (message: string, fields?: Record<string, unknown>) => void;

/**
 * The shared state: in memory (one process), or in Redis when a client is given
 * (routes, registry, rate-limit counters, idempotency keys and the replay memory of signed
 * deliveries shared by every replica). What a request waits on (rate-limit counts,
 * Idempotency-Keys, replay claims) goes through `requests`, a connection without an
 * offline queue (roles/redis.ts), so a Redis outage is answered at once instead of
 * queueing requests; without one, the rate limiter gets such a connection of its own.
 */
export function createStores(
  redis?: RedisClient,
  budgets: Budgets = {},
  requests?: RedisClient,
): Stores {
  if (!redis) {
    return {
      routes: new MemoryRecordStore<RouteRecord>(),
      workflows: new MemoryRecordStore<WorkflowRegistration>(),
      gateways: new MemoryGatewayStore(),
      rateLimiter: new EndpointRateLimiter(),
      idempotency: new MemoryIdempotencyStore({
        ...(budgets.idempotencyBytes ? { maxBytes: budgets.idempotencyBytes } : {}),
      }),
      replay: new MemoryReplayStore(),
      samples: new MemorySampleStore(),
      close: () => {},
    };
  }
  const ownLimiterClient = requests
    ? undefined
    : duplicateWith(redis, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
  const limiterClient = requests ?? ownLimiterClient;
  const routes = new RedisRecordStore<RouteRecord>({ redis, key: REDIS_KEYS.routes });
  const workflows = new RedisRecordStore<WorkflowRegistration>({
    redis,
    key: REDIS_KEYS.workflows,
  });
  const gateways = new RedisGatewayStore({ redis });
  return {
    routes,
    workflows,
    gateways,
    rateLimiter: new EndpointRateLimiter({ redis: limiterClient }),
    idempotency: new RedisIdempotencyStore({ redis: requests ?? redis }),
    replay: new RedisReplayStore({ redis: requests ?? redis }),
    // Not the request-path connection: a sample is recorded after the request is
    // answered for, and may wait for a reconnect.
    samples: new RedisSampleStore({ redis }),
    liveBus: (gateway, log) =>
      RedisLiveEventBus.create({
        redis,
        gateway,
        onError: (err, where) => log(`live events: ${where} failed`, { err }),
      }),
    close: () => {
      routes.close();
      workflows.close();
      gateways.close();
      ownLimiterClient?.disconnect();
    },
  };
}

/** What a serving process needs of its engine, whichever adapter it is. */
export interface ServingEngine extends ExecutionEngine {
  /** Executions waiting (the queue-depth gauge). */
  readonly queued: number;
  /**
   * Age in seconds of the oldest job not done, where the engine reads a shared queue
   * (the hookgate_queue_oldest_age_seconds gauge); undefined: no such gauge.
   */
  readonly oldestAgeSeconds?: number;
  /** Replica acknowledgements of a queue (the hookgate_queue_replica_acks_total counter). */
  readonly replicaAcks?: { readonly counts: ReplicaAckCounts };
}

/**
 * Makes the engine of a serving process, given the observer that feeds its metrics and
 * the route store (where an engine running executions here reads a trigger's callback
 * signing secrets at each delivery attempt). `outbound` checks callback URLs before the
 * 202 (the same guard that sends them when the engine runs in this process).
 */
export type EngineFactory<E extends ServingEngine> = (
  observer: EngineObserver,
  routes: RouteStore,
) => {
  engine: E;
  outbound: OutboundGuard;
  /** The engine's stores, for the store metrics. */
  stores: BoundedStore[];
  /** Every start goes through the shared store (queue mode): no store, no webhook. */
  storeBacked?: boolean;
  /** Where executions that exhausted their retry policy are (the admin API's list). */
  deadLetters: DeadLetterStore;
  close(): Promise<void>;
};

/** The memory analytics backend within its byte budget (a Prometheus one keeps nothing here). */
function withAnalyticsBudget(
  config: AnalyticsBackendConfig,
  budgets: Budgets = {},
): AnalyticsBackendConfig {
  return config.kind === 'memory' && budgets.analyticsBytes
    ? { ...config, maxBytes: budgets.analyticsBytes }
    : config;
}

/** The executions store of an in-process engine, within the budgets. */
export function memoryExecutionStore(budgets: Budgets = {}): MemoryExecutionStore {
  return new MemoryExecutionStore({
    ...(budgets.executionStoreBytes ? { maxBytes: budgets.executionStoreBytes } : {}),
    ...(budgets.storedBodyBytes ? { maxBodyBytes: budgets.storedBodyBytes } : {}),
    ...(budgets.executionTtlMs ? { ttlMs: budgets.executionTtlMs } : {}),
  });
}

/** The Redis executions store, within the budgets, in the deployment's key layout. */
export function redisExecutionStore(
  redis: RedisClient,
  budgets: Budgets = {},
  layout?: ExecutionLayout,
): RedisExecutionStore {
  return new RedisExecutionStore({
    redis,
    ...(layout ? { layout } : {}),
    ...(budgets.executionStoreBytes ? { maxBytes: budgets.executionStoreBytes } : {}),
    ...(budgets.storedBodyBytes ? { maxBodyBytes: budgets.storedBodyBytes } : {}),
    ...(budgets.executionTtlMs ? { ttlMs: budgets.executionTtlMs } : {}),
  });
}

/** The execution keys of a deployment: HOOKGATE_QUEUE_SHARDS shards, tagged on a cluster. */
export function executionLayout(redis: RedisClient, shards = 1): ExecutionLayout {
  return new ExecutionLayout({ shards, cluster: redis.isCluster });
}

/**
 * HOOKGATE_STREAM_BUFFER_BYTES, _STREAMS_PER_EXECUTION and _STREAMS_PER_PROCESS become
 * the listeners' SSE limits.
 */
function withStreamLimits(options: ServingOptions): ServingOptions {
  const budgets = options.budgets ?? {};
  const limits = {
    ...(budgets.streamBufferBytes ? { sseBufferBytes: budgets.streamBufferBytes } : {}),
    ...(budgets.streamsPerExecution ? { streamsPerExecution: budgets.streamsPerExecution } : {}),
    ...(budgets.streamsPerProcess ? { streamsPerProcess: budgets.streamsPerProcess } : {}),
  };
  return Object.keys(limits).length > 0
    ? { ...options, limits: { ...options.limits, ...limits } }
    : options;
}

/** One count of open streams for both listeners: the cap is the process's. */
function processStreams(options: ServingOptions): ProcessStreams {
  return new ProcessStreams(options.limits?.streamsPerProcess ?? SERVER_LIMITS.streamsPerProcess);
}

/** Idempotency-Key answers up to the stored-body limit are kept for replay. */
function idempotencyOptions(store: IdempotencyStore, budgets: Budgets = {}) {
  return { store, ...(budgets.storedBodyBytes ? { maxAnswerBytes: budgets.storedBodyBytes } : {}) };
}

function pageBytes(budgets: Budgets = {}): { listPageBytes?: number } {
  return budgets.listPageBytes ? { listPageBytes: budgets.listPageBytes } : {};
}

function isBounded(store: object): store is BoundedStore {
  return 'storeName' in store && typeof (store as Partial<BoundedStore>).stats === 'function';
}

function boundedOf(...stores: object[]): BoundedStore[] {
  return stores.filter(isBounded);
}

/**
 * Said when a dead-letter list drops entries for room (its maxEntries, or the room the
 * executions store keeps for their records): dead letters were lost.
 */
export function deadLettersDropped(
  report: ((error: unknown, where: string) => void) | undefined,
): (ids: string[], reason: DeadLetterDropReason) => void {
  return (ids, reason) =>
    report?.(
      new Error(
        `${ids.length} dead-letter entr${ids.length === 1 ? 'y' : 'ies'} dropped for room (${
          reason === 'count'
            ? "the list's cap of entries"
            : 'the room the executions store keeps for their records, half of its budget'
        }), the oldest first: ${ids.slice(0, 10).join(', ')}${ids.length > 10 ? ', …' : ''}`,
      ),
      'dead-letter list',
    );
}

/** Executions run in this process (the embedded default, and `HOOKGATE_EXECUTIONS=inline`). */
export function inProcessEngine(
  options: InProcessEngineOptions = {},
  budgets: Budgets = {},
): EngineFactory<InProcessEngine> {
  return (observer, routes) => {
    const store = options.store ?? memoryExecutionStore(budgets);
    // It holds the records of its entries in the store (HeldRecords).
    const deadLetters =
      options.deadLetters ??
      new MemoryDeadLetterStore({
        ...(budgets.executionTtlMs ? { ttlMs: budgets.executionTtlMs } : {}),
        ...(holdsRecords(store) ? { records: store } : {}),
        onDropped: deadLettersDropped(options.onInternalError),
      });
    // Callbacks read their trigger's route at each attempt, from memory between the
    // store's announced changes (nothing on the request path).
    const routeReader = options.routes ? undefined : new CachedRecordReader({ store: routes });
    const engine = new InProcessEngine({
      ...(routeReader ? { routes: routeReader } : {}),
      ...options,
      store,
      deadLetters,
      observer,
    });
    return {
      engine,
      outbound: engine.callbacks.guard,
      deadLetters,
      stores: boundedOf(store, deadLetters),
      async close() {
        try {
          await engine.close(5_000);
        } finally {
          routeReader?.close();
        }
      },
    };
  };
}

/**
 * Executions queued in Redis for `hookgate worker` replicas; records, logs and events
 * read back from Redis. The observer is the workers' (they record execution metrics).
 */
export function queuedEngine(
  redis: RedisClient,
  options: {
    /** The request-path connection (enqueue, reads); `redis` when omitted. */
    requests?: RedisClient;
    maxQueued?: number;
    /** HOOKGATE_QUEUE_SHARDS (default 1). */
    queueShards?: number;
    /** HOOKGATE_QUEUE_ACK_REPLICAS and _TIMEOUT_MS (replica-acks.ts); none by default. */
    queueAcks?: ReplicaAcksOptions;
    outbound?: InProcessEngineOptions['outbound'];
    onInternalError?: InProcessEngineOptions['onInternalError'];
    budgets?: Budgets;
  } = {},
): EngineFactory<QueuedEngine> {
  return () => {
    const requests = options.requests ?? redis;
    const layout = executionLayout(redis, options.queueShards);
    const store = redisExecutionStore(requests, options.budgets, layout);
    const subscriber = shardedSubscriberClient(redis);
    const events = new RedisExecutionEvents({
      subscriber,
      store,
      ...(options.onInternalError ? { onInternalError: options.onInternalError } : {}),
    });
    const engine = new QueuedEngine({
      redis: requests,
      store,
      events,
      ...(options.maxQueued !== undefined ? { maxQueued: options.maxQueued } : {}),
      ...(options.queueAcks ? { replicaAcks: new ReplicaAcks(options.queueAcks) } : {}),
    });
    const outbound =
      options.outbound instanceof OutboundGuard
        ? options.outbound
        : new OutboundGuard(options.outbound ?? {});
    // Retries take entries here: their records are released in the store.
    const deadLetters = new RedisDeadLetterStore({
      redis,
      layout,
      ...(options.budgets?.executionTtlMs ? { ttlMs: options.budgets.executionTtlMs } : {}),
      records: store,
      onDropped: deadLettersDropped(options.onInternalError),
    });
    return {
      engine,
      outbound,
      deadLetters,
      stores: [store, deadLetters],
      storeBacked: true,
      async close() {
        engine.close();
        subscriber.disconnect();
        if (outbound !== options.outbound) await outbound.close();
      },
    };
  };
}

/** Throws 503 store-unavailable while the shared store is known to be down. */
function storeCheck(available: () => boolean, retryAfterSeconds = 1): () => void {
  return () => {
    if (!available())
      throw new StoreUnavailableError('the shared store is unavailable', { retryAfterSeconds });
  };
}

export interface Serving<E extends ServingEngine = ServingEngine> {
  /** The public listener's app: webhooks, probes and metrics. */
  app: FastifyInstance;
  /** The admin listener's app: read API, test requests, analytics, dashboard, live streams. */
  admin: FastifyInstance;
  /** The Prometheus registry behind /metrics (for a separate metrics listener). */
  registry: Registry;
  engine: E;
  table: RouteTable;
  /** Reports what the table serves (the operator's Deployed condition reads it). */
  reporter: GatewayReporter;
  /** What /readyz answers (for a separate probes listener). */
  readiness(): Readiness;
  /** Not ready from now on (shutdown has begun); close() says it too. */
  startDraining(): void;
  close(): Promise<void>;
}

/** The metrics only an engine over a shared queue has. */
function addQueueMetrics(metrics: GatewayMetrics, engine: ServingEngine): void {
  if (engine.oldestAgeSeconds !== undefined)
    metrics.addQueueOldestAge(() => engine.oldestAgeSeconds ?? 0);
  if (engine.replicaAcks) metrics.addReplicaAcks(engine.replicaAcks.counts);
}

type ServingAdmin = { source?: ResourceSource; manifestErrors?: () => unknown[] };

/**
 * The webhook and admin apps over `stores`, with the engine `makeEngine` makes. A start
 * that fails half-way closes what it had opened (the route table's watch, the engine's
 * connections, the live bus, the apps, the gateway's report and its refresh timer, the
 * series-forgetting timer) before it throws; the stores are the caller's.
 */
export async function createServing<E extends ServingEngine>(
  given: ServingOptions,
  stores: Stores,
  makeEngine: EngineFactory<E>,
  admin: ServingAdmin = {},
): Promise<Serving<E>> {
  const opened: (() => unknown)[] = [];
  try {
    return await assembleServing(given, stores, makeEngine, admin, (close) => opened.push(close));
  } catch (error) {
    for (const close of opened.reverse()) {
      await Promise.resolve()
        .then(close)
        .catch(() => undefined);
    }
    throw error;
  }
}

async function assembleServing<E extends ServingEngine>(
  given: ServingOptions,
  stores: Stores,
  makeEngine: EngineFactory<E>,
  admin: ServingAdmin,
  opened: (close: () => unknown) => void,
): Promise<Serving<E>> {
  const options = withStreamLimits(given);
  const streams = processStreams(options);
  const log = (message: string, fields?: Record<string, unknown>) =>
    options.logger?.warn(fields ?? {}, message);
  const table = await RouteTable.create(stores.routes, stores.workflows, log, {
    waitForFirstLoad: options.waitForRoutes ?? true,
  });
  opened(() => table.close());
  // Ready when the routes are loaded, not draining, and the role's own check agrees.
  let draining = false;
  const readiness = (): Readiness => {
    // Said at once on every listener: the chart probes the metrics listener, which
    // closes only after the drain.
    if (draining) return { ready: false, status: 'draining' };
    if (!table.loaded) return { ready: false, status: 'loading routes' };
    return options.readiness?.() ?? { ready: true, status: 'ready' };
  };
  const { afterListen, ...report } = options.report ?? {};
  const reporter = new GatewayReporter({ store: stores.gateways, table, ...report, log });
  // Either way it starts (below): a close before its start writes nothing to the store;
  // after, it withdraws the report (else its timer kept refreshing it: a gateway the
  // operator counted for as long as the process went on).
  opened(() => reporter.close());
  // The queue-depth gauge reads the engine, which reports to the metrics: each is
  // used by the other only after both exist.
  const analytics = createAnalytics({
    backend: withAnalyticsBudget(options.analytics ?? { kind: 'memory' }, options.budgets),
    queueDepth: () => engine.queued,
    deadLetters: () => made.deadLetters.count(),
  });
  const made = makeEngine(analytics.metrics.engineObserver(), stores.routes);
  opened(() => made.close());
  const engine = made.engine;
  addQueueMetrics(analytics.metrics, engine);
  const stopForgetting = forgetGoneSeries(analytics.metrics, () =>
    table.loaded ? table.servedLabels() : undefined,
  );
  opened(stopForgetting);
  const guards = createGuards({
    sameOrigin: new URL(options.baseUrl).origin,
    rateLimiter: stores.rateLimiter,
    replay: stores.replay,
    onRateLimit: (decision) => analytics.metrics.recordRateLimitDecision(decision),
    // JWKS fetches and token introspection go out under the same policy as callbacks.
    outbound: made.outbound,
    onOutboundRefused: ({ route, purpose, reason }) =>
      log(
        `${purpose === 'jwks' ? 'JWKS fetch' : 'token introspection'} refused by the outbound policy`,
        {
          code: 'HG_ERR_OUTBOUND_REFUSED',
          trigger: route,
          purpose,
          reason,
        },
      ),
    onJwksStale: (route, { failedRefreshes, ageMs, reason }) =>
      log('JWKS refresh failed: verifying with the last good key set', {
        trigger: route.key,
        failedRefreshes,
        ageSeconds: Math.round(ageMs / 1000),
        reason,
      }),
    ...options.guards,
  });
  const samples = new SampleRecorder({
    store: stores.samples,
    onError: (error) => log('schema learning: recording a sample failed', { error: String(error) }),
  });
  const liveBus = await stores.liveBus?.(reporter.id, log);
  opened(() => liveBus?.close());
  const live = new LiveEventHub({ gateway: reporter.id, ...(liveBus ? { bus: liveBus } : {}) });
  const app = await buildApp({
    table,
    engine,
    guards,
    live,
    idempotency: idempotencyOptions(stores.idempotency, options.budgets),
    observer: analytics.observer,
    samples,
    ...(made.storeBacked && options.storeAvailable
      ? { storeCheck: storeCheck(options.storeAvailable, options.storeRetryAfterSeconds) }
      : {}),
    plugins: [
      async (scope) => {
        await scope.register(probes, {
          registry: analytics.registry,
          readiness,
          metrics: options.publicMetrics !== false,
        });
      },
    ],
    modes: {
      validateCallbackUrl: (url, workflow) => validateCallbackUrl(url, made.outbound, workflow),
      outputValidator: learningOutputValidator(samples, outputValidatorFor),
    },
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.heartbeatMs ? { heartbeatMs: options.heartbeatMs } : {}),
    ...(options.limits ? { limits: options.limits } : {}),
    streams,
    ...traceOptions(options),
  });
  opened(() => app.close());
  // The operator counts this gateway from its first report: in a process, only once
  // requests can reach it (the webhook listener is up); embedded, at once.
  if (afterListen) {
    app.addHook('onListen', (done) => {
      void reporter.start();
      done();
    });
  } else {
    await reporter.start();
  }
  const adminApp = await buildAdminApp({
    webhooks: app,
    baseUrl: options.baseUrl,
    table,
    engine,
    deadLetters: made.deadLetters,
    deadLettersRetried: (count) => analytics.metrics.recordRetry('dead_letter', count),
    idempotency: stores.idempotency,
    live,
    samples: stores.samples,
    plugins: analytics.plugins,
    ...(options.adminAccess ? { access: options.adminAccess } : {}),
    ...(admin.source ? { source: admin.source } : {}),
    ...(admin.manifestErrors ? { manifestErrors: admin.manifestErrors } : {}),
    ...pageBytes(options.budgets),
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.heartbeatMs ? { heartbeatMs: options.heartbeatMs } : {}),
    ...(options.limits ? { limits: options.limits } : {}),
    streams,
  });
  storeMetrics(analytics.registry, [
    ...made.stores,
    ...boundedOf(stores.idempotency, stores.samples),
    ...analytics.stores,
    sseBuffers([app, adminApp]),
  ]);
  streamMetrics(analytics.registry, streams);
  return {
    app,
    admin: adminApp,
    registry: analytics.registry,
    engine,
    table,
    reporter,
    readiness,
    startDraining: () => {
      draining = true;
    },
    async close() {
      draining = true;
      stopForgetting();
      // Withdrawn first: the operator stops counting this gateway before it stops serving.
      await reporter.close();
      await Promise.all([app.close(), adminApp.close()]);
      table.close();
      await liveBus?.close();
      await made.close();
    },
  };
}

/** HOOKGATE_TRACE_CONTEXT and tracing (ADR 0033, ADR 0040) for the webhook app, as set. */
function traceOptions(options: ServingOptions): Pick<AppOptions, 'traceContext' | 'tracing'> {
  return {
    ...(options.traceContext ? { traceContext: options.traceContext } : {}),
    ...(options.tracing ? { tracing: options.tracing } : {}),
  };
}
