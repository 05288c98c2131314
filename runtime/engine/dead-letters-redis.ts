// Redis adapter of the dead-letter list, shared by workers (which add entries) and
// gateways (whose admin API lists and retries them). One tag of their own on a Redis
// Cluster or with several shards (execution-keys.ts), untagged on one Redis with one:
//
//   hookgate:{deadletters}          sorted set of execution ids scored by dead-letter time (ms;
//                                   deadLetterTime: adding an entry again keeps its time)
//   hookgate:{deadletters}:entries  hash: execution id -> the entry as JSON
//   hookgate:{deadletters}:holds    hash: execution id -> the number of the hold (of its
//                                   record, HeldRecords) its entry was written under
//
// Each write is one Lua script over the three keys, so they never disagree: add (bounded:
// the oldest entries beyond `maxEntries` go; expired ones too; and those whose records
// the hold cannot keep), take (remove and return, so of two concurrent retries of one
// entry exactly one gets it).
//
// The records are in the executions' shards, in other hash slots than these keys: the
// steps around a script (hold before the add; `listed`, which drops the records beyond
// the hold's bound, and release after: dead-letters.ts DeadLetterHolds) are apart from
// it, in the order that never lists an entry whose record the budget may drop, and
// numbered so that two adds at once do not either (HeldRecords). A process that dies
// between them leaves a record held without an entry: until it expires, or the hold's
// bound drops it (once its hold was said listed).
import type { RedisClient } from '../../api/records/redis-client.ts';
import type { BoundedStore, BoundedStoreStats } from '../bounded.ts';
import { ExecutionLayout, SINGLE_REDIS_LAYOUT, type DeadLetterKeys } from './execution-keys.ts';
import {
  DEAD_LETTER_DEFAULTS,
  DeadLetterHolds,
  deadLetterTime,
  listLimit,
  matchesDeadLetter,
  type DeadLetter,
  type DeadLetterFilter,
  type DeadLetterStore,
  type DeadLetterStoreOptions,
  type ReleasedRecord,
  type TakenDeadLetter,
} from './dead-letters.ts';

/** The keys on one Redis with one shard (execution-keys.ts names every layout). */
export const DEAD_LETTER_KEYS = SINGLE_REDIS_LAYOUT.deadLetters;

// KEYS: index, entries, holds. ARGV: id, score (ms), entry JSON, cutoff (ms), max
// entries, the number of the hold it is written under ('' when none), then the (id,
// hold number) pairs to take out (their records are beyond the hold). An entry keeps the
// highest number it was written under (two adds may write in the other order than they
// held). One named is taken out only if its number is at most the one named (or it has
// none: written by a process from before the numbers): a higher one, it was held again
// since and written by that add, and its record stays (LISTED). One named that has
// expired counts as expired. Returns { the number of expired entries dropped, the number
// of entries dropped for max entries, their (id, number written under or '') pairs, then
// the ids of the entries named that it took out (listed until then, not expired; a
// record can be held without an entry) }.
const ADD = `
local function remove(id)
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
end
local cutoff = tonumber(ARGV[4])
local expired = 0
local beyond = {}
for i = 7, #ARGV, 2 do
  local id = ARGV[i]
  local written = redis.call('HGET', KEYS[3], id)
  if not written or tonumber(written) <= tonumber(ARGV[i + 1]) then
    local score = redis.call('ZSCORE', KEYS[1], id)
    remove(id)
    if score and tonumber(score) < cutoff then expired = expired + 1
    elseif score then beyond[#beyond + 1] = id end
  end
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
if ARGV[6] ~= '' then
  local written = redis.call('HGET', KEYS[3], ARGV[1])
  if not written or tonumber(written) < tonumber(ARGV[6]) then redis.call('HSET', KEYS[3], ARGV[1], ARGV[6]) end
end
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[4])
for _, id in ipairs(old) do remove(id) end
local out = { expired + #old, 0 }
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[5])
if over > 0 then
  for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, over - 1)) do
    out[#out + 1] = id
    out[#out + 1] = redis.call('HGET', KEYS[3], id) or ''
    remove(id)
  end
  out[2] = (#out - 2) / 2
end
for _, id in ipairs(beyond) do out[#out + 1] = id end
return out
`;

// KEYS: index, entries, holds. ARGV: id, cutoff (ms). { the entry, the number of the
// hold it was last written under or '' }; 0 when it had expired (taken out all the same,
// and counted as such); false when there is none.
const TAKE = `
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then return false end
local entry = redis.call('HGET', KEYS[2], ARGV[1])
local written = redis.call('HGET', KEYS[3], ARGV[1]) or ''
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
if tonumber(score) < tonumber(ARGV[2]) then return 0 end
if not entry then return false end
return { entry, written }
`;

interface DeadLetterCommands {
  hookgateDeadLetterAdd(
    index: string,
    entries: string,
    holds: string,
    ...args: (string | number)[]
  ): Promise<(number | string)[]>;
  hookgateDeadLetterTake(
    index: string,
    entries: string,
    holds: string,
    ...args: (string | number)[]
  ): Promise<[string, string] | 0 | null>;
}

/** A record whose entry left, with the number its entry was written under ('': none). */
function releasedRecord(id: string, written: string): ReleasedRecord {
  return written === '' ? { id } : { id, hold: Number(written) };
}

/** Ids read per round when a filtered list has to look further back. */
const SCAN_BATCH = 200;

export class RedisDeadLetterStore implements DeadLetterStore, BoundedStore {
  readonly storeName = 'dead-letters';
  readonly #redis: RedisClient & DeadLetterCommands;
  readonly #keys: DeadLetterKeys;
  readonly #max: number;
  readonly #ttlMs: number;
  readonly #holds: DeadLetterHolds;
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
      redis.defineCommand('hookgateDeadLetterAdd', { numberOfKeys: 3, lua: ADD });
      redis.defineCommand('hookgateDeadLetterTake', { numberOfKeys: 3, lua: TAKE });
    }
    this.#redis = redis as RedisClient & DeadLetterCommands;
    this.#keys = (
      options.layout ?? new ExecutionLayout({ cluster: redis.isCluster === true })
    ).deadLetters;
    this.#max = options.maxEntries ?? DEAD_LETTER_DEFAULTS.maxEntries;
    this.#ttlMs = options.ttlMs ?? DEAD_LETTER_DEFAULTS.ttlMs;
    this.#holds = new DeadLetterHolds(options);
    this.#now = options.now ?? Date.now;
  }

  add(entry: DeadLetter): Promise<boolean> {
    return this.#holds.add(entry, async (hold, beyond) => {
      const now = this.#now();
      const [expired, overCount, ...ids] = await this.#redis.hookgateDeadLetterAdd(
        this.#keys.index,
        this.#keys.entries,
        this.#keys.holds,
        entry.executionId,
        deadLetterTime(entry, now),
        JSON.stringify(entry),
        now - this.#ttlMs,
        this.#max,
        hold ?? '',
        ...beyond.flatMap((named) => [named.id, named.hold]),
      );
      this.#holds.evictions.expired += Number(expired);
      const over: ReleasedRecord[] = [];
      for (let i = 0; i < 2 * Number(overCount); i += 2)
        over.push(releasedRecord(String(ids[i]), String(ids[i + 1])));
      return { overCount: over, beyond: ids.slice(over.length * 2).map(String) };
    });
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
        if (filter.namespaceReadable && !(await filter.namespaceReadable(entry.namespace)))
          continue;
        found.push(entry);
        if (found.length === limit) break;
      }
      if (ids.length < SCAN_BATCH) break;
    }
    return found;
  }

  async take(executionId: string): Promise<TakenDeadLetter | undefined> {
    const taken = await this.#redis.hookgateDeadLetterTake(
      this.#keys.index,
      this.#keys.entries,
      this.#keys.holds,
      executionId,
      this.#cutoff(),
    );
    if (taken === 0) this.#holds.evictions.expired += 1;
    if (!taken) return undefined;
    const [json, written] = taken;
    const { hold } = releasedRecord(executionId, written);
    const entry = JSON.parse(json) as DeadLetter;
    return hold !== undefined ? { entry, hold } : { entry };
  }

  release(taken: TakenDeadLetter): Promise<void> {
    return this.#holds.release(taken);
  }

  count(): Promise<number> {
    return this.#redis.zcount(this.#keys.index, this.#cutoff(), '+inf');
  }

  /** Entries listed, the bytes their held records take, and what this process dropped. */
  stats(): Promise<BoundedStoreStats> {
    return this.#holds.stats(this.count());
  }

  #cutoff(): number {
    return this.#now() - this.#ttlMs;
  }
}
