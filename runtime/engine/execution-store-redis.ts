// Redis adapter of the executions store, shared by gateways (which create the queued
// record and read executions for the API) and workers (which run them):
//
//   hookgate:exec:<id>            the execution as JSON, expiring `ttlMs` after creation
//   hookgate:exec:<id>:events     its events, a list in seq order (same expiry)
//   hookgate:executions           index: sorted set of ids scored by creation time (ms)
//   hookgate:exec:<id>:events     also the pub/sub channel each new event is published on
//
// Appending is one Lua script that skips events already stored (seq ≤ list length), so
// a worker streaming events one by one and the final whole-history append agree, and
// every event is published exactly once, in order, as it is stored.
import type { Redis } from 'ioredis';
import { DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT, type ExecutionStore } from './execution-store.ts';
import type { Execution, ExecutionFilter, SequencedEvent } from './ports.ts';

export const EXECUTION_KEYS = {
  index: 'hookgate:executions',
  record: (id: string) => `hookgate:exec:${id}`,
  events: (id: string) => `hookgate:exec:${id}:events`,
} as const;

// KEYS[1] events list; ARGV[1] ttl ms, then (seq, json) pairs in seq order.
const APPEND_EVENTS = `
local stored = redis.call('LLEN', KEYS[1])
local added = 0
for i = 2, #ARGV, 2 do
  if tonumber(ARGV[i]) > stored then
    redis.call('RPUSH', KEYS[1], ARGV[i + 1])
    redis.call('PUBLISH', KEYS[1], ARGV[i + 1])
    stored = stored + 1
    added = added + 1
  end
end
if added > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return added
`;

interface AppendCommand {
  hookgateAppendEvents(key: string, ttlMs: number, ...pairs: string[]): Promise<number>;
}

export interface RedisExecutionStoreOptions {
  redis: Redis;
  /** How long an execution and its events are kept after creation. Default 24 h. */
  ttlMs?: number;
  /** Clock (tests). */
  now?: () => number;
}

/** Ids read per round when a filtered list has to look further back. */
const SCAN_BATCH = 200;
/** Ids looked at, at most, for one list call (bounds a filter that matches little). */
const SCAN_CAP = 20 * MAX_LIST_LIMIT;
/** Index entries older than the TTL are trimmed at most this often. */
const TRIM_EVERY_MS = 60_000;

export class RedisExecutionStore implements ExecutionStore {
  readonly #redis: Redis & AppendCommand;
  readonly #ttlMs: number;
  readonly #now: () => number;
  #trimmedAt = 0;

  constructor(options: RedisExecutionStoreOptions) {
    const redis = options.redis as Redis & Partial<AppendCommand>;
    if (!redis.hookgateAppendEvents) {
      redis.defineCommand('hookgateAppendEvents', { numberOfKeys: 1, lua: APPEND_EVENTS });
    }
    this.#redis = redis as Redis & AppendCommand;
    this.#ttlMs = options.ttlMs ?? 24 * 3_600_000;
    this.#now = options.now ?? Date.now;
  }

  /** Lifetime left for an execution created at `createdAt` (at least 1 s). */
  ttlLeftMs(createdAt: string): number {
    const created = Date.parse(createdAt) || this.#now();
    return Math.max(1_000, created + this.#ttlMs - this.#now());
  }

  get ttlMs(): number {
    return this.#ttlMs;
  }

  async save(execution: Execution): Promise<void> {
    const created = Date.parse(execution.createdAt) || this.#now();
    const multi = this.#redis
      .multi()
      .set(
        EXECUTION_KEYS.record(execution.id),
        JSON.stringify(execution),
        'PX',
        this.ttlLeftMs(execution.createdAt),
      )
      .zadd(EXECUTION_KEYS.index, 'NX', created, execution.id);
    if (this.#now() - this.#trimmedAt > TRIM_EVERY_MS) {
      this.#trimmedAt = this.#now();
      multi.zremrangebyscore(EXECUTION_KEYS.index, '-inf', `(${this.#now() - this.#ttlMs}`);
    }
    await multi.exec();
  }

  async get(id: string): Promise<Execution | undefined> {
    const json = await this.#redis.get(EXECUTION_KEYS.record(id));
    if (!json) return undefined;
    const execution = JSON.parse(json) as Execution;
    // Redis expires the key on its own; this hides it on the store's clock too.
    return this.#expired(execution) ? undefined : execution;
  }

  async list(filter: ExecutionFilter): Promise<Execution[]> {
    const limit = Math.min(Math.max(1, filter.limit ?? DEFAULT_LIST_LIMIT), MAX_LIST_LIMIT);
    const cutoff = this.#now() - this.#ttlMs;
    const since = Math.max(cutoff, filter.since ? Date.parse(filter.since) : cutoff);
    const until = filter.until ? `(${Date.parse(filter.until)}` : '+inf';
    const found: Execution[] = [];
    for (let offset = 0; found.length < limit && offset < SCAN_CAP; offset += SCAN_BATCH) {
      const ids = await this.#redis.zrevrangebyscore(
        EXECUTION_KEYS.index,
        until,
        since,
        'LIMIT',
        offset,
        SCAN_BATCH,
      );
      if (ids.length === 0) break;
      const records = await this.#redis.mget(ids.map((id) => EXECUTION_KEYS.record(id)));
      for (const json of records) {
        if (!json) continue;
        const e = JSON.parse(json) as Execution;
        if (this.#expired(e)) continue;
        if (filter.workflowId !== undefined && e.workflowId !== filter.workflowId) continue;
        if (filter.triggerKey !== undefined && e.triggerKey !== filter.triggerKey) continue;
        if (filter.status !== undefined && e.status !== filter.status) continue;
        found.push(e);
        if (found.length === limit) break;
      }
      if (ids.length < SCAN_BATCH) break;
    }
    return found;
  }

  async appendEvents(events: SequencedEvent[]): Promise<void> {
    const byExecution = new Map<string, SequencedEvent[]>();
    for (const event of events) {
      const list = byExecution.get(event.executionId) ?? [];
      list.push(event);
      byExecution.set(event.executionId, list);
    }
    await Promise.all(
      [...byExecution].map(([id, list]) =>
        this.#redis.hookgateAppendEvents(
          EXECUTION_KEYS.events(id),
          this.#ttlMs,
          ...list.flatMap((e) => [String(e.seq), JSON.stringify(e)]),
        ),
      ),
    );
  }

  async events(id: string, afterSeq: number): Promise<SequencedEvent[]> {
    // Seqs are 1, 2, 3… in list order, so the events after `afterSeq` start at that index.
    const raw = await this.#redis.lrange(EXECUTION_KEYS.events(id), Math.max(0, afterSeq), -1);
    return raw.map((json) => JSON.parse(json) as SequencedEvent).filter((e) => e.seq > afterSeq);
  }

  #expired(execution: Execution): boolean {
    return Date.parse(execution.createdAt) < this.#now() - this.#ttlMs;
  }

  /** Number of events stored for an execution (a worker continues numbering after it). */
  eventCount(id: string): Promise<number> {
    return this.#redis.llen(EXECUTION_KEYS.events(id));
  }
}
