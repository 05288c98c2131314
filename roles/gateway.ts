// `hookgate gateway`: serves the routes an operator wrote to Redis (any number of
// replicas; rate limits and Idempotency-Keys shared through Redis). By default each
// accepted request's execution is queued in Redis for the `hookgate worker` replicas;
// `executions: 'inline'` runs them in this process instead (no workers to deploy).
import type { RedisClient } from '../api/records/redis-client.ts';
import type { ReplicaAcksOptions } from '../runtime/engine/replica-acks.ts';
import {
  createServing,
  createStores,
  inProcessEngine,
  type EngineFactory,
  queuedEngine,
  type Serving,
  type ServingEngine,
  type ServingOptions,
} from './serving.ts';

export interface GatewayOptions extends ServingOptions {
  redis: RedisClient;
  /** The request-path connection (roles/redis.ts); `redis` when omitted. */
  requests?: RedisClient;
  /** Where executions run: `queue` (workers; the default) or `inline` (this process). */
  executions?: 'queue' | 'inline';
  /** Queue mode: jobs waiting at most before requests are refused with 503. */
  maxQueued?: number;
  /** Queue mode: shards of the queue (HOOKGATE_QUEUE_SHARDS; default 1). */
  queueShards?: number;
  /** Queue mode: replicas a queued execution must be on before its 202 (HOOKGATE_QUEUE_ACK_*). */
  queueAcks?: ReplicaAcksOptions;
}

export async function createGatewayRuntime(options: GatewayOptions): Promise<Serving> {
  const stores = createStores(options.redis, options.budgets, options.requests);
  const makeEngine: EngineFactory<ServingEngine> =
    options.executions === 'inline'
      ? inProcessEngine(options.engine, options.budgets)
      : queuedEngine(options.redis, {
          ...(options.budgets ? { budgets: options.budgets } : {}),
          ...(options.requests ? { requests: options.requests } : {}),
          ...(options.maxQueued !== undefined ? { maxQueued: options.maxQueued } : {}),
          ...(options.queueShards !== undefined ? { queueShards: options.queueShards } : {}),
          ...(options.queueAcks ? { queueAcks: options.queueAcks } : {}),
          ...(options.engine?.outbound ? { outbound: options.engine.outbound } : {}),
          ...(options.engine?.onInternalError
            ? { onInternalError: options.engine.onInternalError }
            : {}),
        });
  const serving: Serving = await createServing(options, stores, makeEngine).catch(
    (error: unknown) => {
      stores.close();
      throw error;
    },
  );
  return {
    ...serving,
    async close() {
      await serving.close();
      stores.close();
    },
  };
}
