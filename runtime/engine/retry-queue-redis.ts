// Delayed re-delivery of execution attempts through Redis (distributed mode):
//
//   hookgate:{s<k>}:queue:retries   per shard (execution-keys.ts): sorted set of job JSON
//                                   scored by the time the attempt is due (ms)
//
// An execution's attempts wait in its shard's set and go back to its shard's stream,
// so each script is over keys of one shard (one slot on a Redis Cluster).
// A worker whose attempt failed under a retry policy hands the execution over in one
// script: the record (queued, nextAttemptAt) is saved and the next attempt's job added
// to the set; only then is the stream entry of the failed attempt acknowledged. Every
// worker moves due jobs to the stream (`promote`), each due job in one script (ZREM,
// then XADD only when the ZREM removed it), so two workers never both move one.
//
// A worker killed between the two steps leaves either the old attempt unacknowledged
// (the record still says it runs: another worker runs it again) or a job whose attempt
// the record has moved past (it is dropped): see worker.ts.
import type { RedisClient } from '../../api/records/redis-client.ts';
import type { RetryHandOff } from './engine.ts';
import type { RedisExecutionStore } from './execution-store-redis.ts';
import { EXECUTION_KEYS } from './execution-store-redis.ts';
import { queuedDiscard } from './execution-store.ts';
import { recordJson } from './execution-record-redis.ts';
import { EXECUTION_FIELDS, type ExecutionLayout } from './execution-keys.ts';
import type { Execution, StartRequest } from './ports.ts';
import type { ExecutionJob } from './queued-engine.ts';

/** The due set of one Redis with one shard (execution-keys.ts names every layout). */
export const RETRY_KEYS = { due: EXECUTION_KEYS.retries } as const;

// KEYS: execution (its hash: execution-store-redis.ts), due set. ARGV: record JSON
// without its input, due ms, job JSON. Waiting for its next attempt, an execution has no
// expiry: its finishing write sets one (ADR 0036).
const SCHEDULE = `
redis.call('HSET', KEYS[1], '${EXECUTION_FIELDS.record}', ARGV[1])
redis.call('PERSIST', KEYS[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
return 1
`;

// KEYS: due set, stream. ARGV: now ms, at most this many. Returns the number moved.
const PROMOTE = `
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local moved = 0
for _, job in ipairs(due) do
  if redis.call('ZREM', KEYS[1], job) == 1 then
    redis.call('XADD', KEYS[2], '*', 'job', job)
    moved = moved + 1
  end
end
return moved
`;

interface RetryCommands {
  hookgateRetrySchedule(
    execution: string,
    due: string,
    ...args: (string | number)[]
  ): Promise<number>;
  hookgateRetryPromote(due: string, stream: string, now: number, max: number): Promise<number>;
}

export class RedisRetryQueue implements RetryHandOff {
  readonly #redis: RedisClient & RetryCommands;
  readonly #layout: ExecutionLayout;

  constructor(options: { redis: RedisClient; store: RedisExecutionStore }) {
    const redis = options.redis as RedisClient & Partial<RetryCommands>;
    if (!redis.hookgateRetrySchedule) {
      redis.defineCommand('hookgateRetrySchedule', { numberOfKeys: 2, lua: SCHEDULE });
      redis.defineCommand('hookgateRetryPromote', { numberOfKeys: 2, lua: PROMOTE });
    }
    this.#redis = redis as RedisClient & RetryCommands;
    this.#layout = options.store.layout;
  }

  async schedule(execution: Execution, request: StartRequest, dueAtMs: number): Promise<void> {
    const job: ExecutionJob = {
      id: execution.id,
      triggerKey: execution.triggerKey,
      workflowId: execution.workflowId,
      attempt: (execution.attempt ?? 1) + 1,
      ...(request.callbackUrl ? { callbackUrl: request.callbackUrl } : {}),
      ...(request.idempotencyWindowMs === undefined
        ? {}
        : { idempotencyWindowMs: request.idempotencyWindowMs }),
    };
    // The views of the workflow so far (the gateway's, this worker's): the next attempt's
    // worker discards its success only if they and its own say Discard (ADR 0041).
    const discard = queuedDiscard(request);
    if (discard !== undefined) job.discardIfSucceeded = discard;
    const keys = this.#layout.of(execution.id);
    await this.#redis.hookgateRetrySchedule(
      keys.execution(execution.id),
      keys.retries,
      // The input stays as the hash holds it (it does not change between attempts).
      recordJson(execution),
      dueAtMs,
      JSON.stringify(job),
    );
  }

  /**
   * Moves the jobs due by `nowMs` (at most `max` a shard) to their shard's stream;
   * returns how many.
   */
  async promote(nowMs = Date.now(), max = 100): Promise<number> {
    const moved = await Promise.all(
      this.#layout.shards.map((s) =>
        this.#redis.hookgateRetryPromote(s.retries, s.stream, nowMs, max),
      ),
    );
    return moved.reduce((a, b) => a + b, 0);
  }

  /** Attempts waiting to be due (all shards). */
  async waiting(): Promise<number> {
    const counts = await Promise.all(this.#layout.shards.map((s) => this.#redis.zcard(s.retries)));
    return counts.reduce((a, b) => a + b, 0);
  }
}
