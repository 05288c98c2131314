// Redis adapter of the dead-letter list, shared by workers (which add entries) and
// gateways (whose admin API lists and retries them). One tag of their own on a Redis
// Cluster or with several shards (execution-keys.ts), untagged on one Redis with one:
//
//   hookgate:{deadletters}          sorted set of execution ids scored by dead-letter time (ms;
//                                   deadLetterTime: adding an entry again keeps its time)
//   hookgate:{deadletters}:entries  hash: execution id -> the entry as JSON
//
// Each write is one Lua script over both keys, so they never disagree: add (bounded:
// the oldest entries beyond `maxEntries` go; expired ones too), take (remove and return,
// so of two concurrent retries of one entry exactly one gets it).
import type { RedisClient } from '../../api/records/redis-client.ts';
import { ExecutionLayout, SINGLE_REDIS_LAYOUT, type DeadLetterKeys } from './execution-keys.ts';
import {
  DEAD_LETTER_DEFAULTS,
  deadLetterTime,
  listLimit,
  matchesDeadLetter,
  type DeadLetter,
  type DeadLetterFilter,
  type DeadLetterStore,
  type DeadLetterStoreOptions,
} from './dead-letters.ts';

/** The keys on one Redis with one shard (execution-keys.ts names every layout). */
export const DEAD_LETTER_KEYS = SINGLE_REDIS_LAYOUT.deadLetters;

// KEYS: index, entries. ARGV: id, score (ms), entry JSON, cutoff (ms), max entries.
const ADD = `
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[4])
for _, id in ipairs(expired) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
end
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[5])
if over > 0 then
  for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, over - 1)) do
    redis.call('ZREM', KEYS[1], id)
    redis.call('HDEL', KEYS[2], id)
  end
end
return 1
`;

// KEYS: index, entries. ARGV: id, cutoff (ms). The entry, or false when there is none.
const TAKE = `
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then return false end
local entry = redis.call('HGET', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if tonumber(score) < tonumber(ARGV[2]) then return false end
return entry
`;

interface DeadLetterCommands {
  hookgateDeadLetterAdd(
    index: string,
    entries: string,
    ...args: (string | number)[]
  ): Promise<number>;
  hookgateDeadLetterTake(
    index: string,
    entries: string,
    ...args: (string | number)[]
  ): Promise<string | null>;
}

/** Ids read per round when a filtered list has to look further back. */
const SCAN_BATCH = 200;

export class RedisDeadLetterStore implements DeadLetterStore {
  readonly #redis: RedisClient & DeadLetterCommands;
  readonly #keys: DeadLetterKeys;
  readonly #max: number;
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor(
    options: DeadLetterStoreOptions & {
      redis: RedisClient;
      /** The deployment's key layout (HOOKGATE_QUEUE_SHARDS); default one shard. */
      layout?: ExecutionLayout;
    },
  ) {
    const redis = options.redis as RedisClient & Partial<DeadLetterCommands>;
    if (!redis.hookgateDeadLetterAdd) {
      redis.defineCommand('hookgateDeadLetterAdd', { numberOfKeys: 2, lua: ADD });
      redis.defineCommand('hookgateDeadLetterTake', { numberOfKeys: 2, lua: TAKE });
    }
    this.#redis = redis as RedisClient & DeadLetterCommands;
    this.#keys = (
      options.layout ?? new ExecutionLayout({ cluster: redis.isCluster === true })
    ).deadLetters;
    this.#max = options.maxEntries ?? DEAD_LETTER_DEFAULTS.maxEntries;
    this.#ttlMs = options.ttlMs ?? DEAD_LETTER_DEFAULTS.ttlMs;
    this.#now = options.now ?? Date.now;
  }

  async add(entry: DeadLetter): Promise<void> {
    const now = this.#now();
    await this.#redis.hookgateDeadLetterAdd(
      this.#keys.index,
      this.#keys.entries,
      entry.executionId,
      deadLetterTime(entry, now),
      JSON.stringify(entry),
      now - this.#ttlMs,
      this.#max,
    );
  }

  async get(executionId: string): Promise<DeadLetter | undefined> {
    const [score, json] = await Promise.all([
      this.#redis.zscore(this.#keys.index, executionId),
      this.#redis.hget(this.#keys.entries, executionId),
    ]);
    if (score === null || !json || Number(score) < this.#cutoff()) return undefined;
    return JSON.parse(json) as DeadLetter;
  }

  async list(filter: DeadLetterFilter): Promise<DeadLetter[]> {
    const limit = listLimit(filter);
    const found: DeadLetter[] = [];
    for (let offset = 0; found.length < limit; offset += SCAN_BATCH) {
      const ids = await this.#redis.zrevrangebyscore(
        this.#keys.index,
        '+inf',
        this.#cutoff(),
        'LIMIT',
        offset,
        SCAN_BATCH,
      );
      if (ids.length === 0) break;
      const entries = await this.#redis.hmget(this.#keys.entries, ...ids);
      for (const json of entries) {
        if (!json) continue;
        const entry = JSON.parse(json) as DeadLetter;
        if (!matchesDeadLetter(entry, filter)) continue;
        found.push(entry);
        if (found.length === limit) break;
      }
      if (ids.length < SCAN_BATCH) break;
    }
    return found;
  }

  async take(executionId: string): Promise<DeadLetter | undefined> {
    const json = await this.#redis.hookgateDeadLetterTake(
      this.#keys.index,
      this.#keys.entries,
      executionId,
      this.#cutoff(),
    );
    return json ? (JSON.parse(json) as DeadLetter) : undefined;
  }

  count(): Promise<number> {
    return this.#redis.zcount(this.#keys.index, this.#cutoff(), '+inf');
  }

  #cutoff(): number {
    return this.#now() - this.#ttlMs;
  }
}
