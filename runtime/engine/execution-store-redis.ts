// Redis adapter of the executions store, shared by gateways (which create the queued
// record and read executions for the API) and workers (which run them). Keys of one
// shard (execution-keys.ts; on one Redis with one shard without the `{s<k>}` tag):
//
//   hookgate:{s<k>}:exec:<id>            the execution as JSON, expiring `ttlMs` after creation
//   hookgate:{s<k>}:exec:<id>:events     its events, a list in seq order (same expiry)
//   hookgate:{s<k>}:exec:<id>:events     also the pub/sub channel each new event is published on
//   hookgate:{s<k>}:exec:<id>:events:<seq>:whole  a cut event whole, for `handoverMs` (5 s)
//   hookgate:{s<k>}:executions           index: sorted set of ids scored by creation time (ms)
//   hookgate:{s<k>}:executions:finished  finished executions, scored by creation time: the
//                                        ones the byte budget may drop, oldest first
//   hookgate:{s<k>}:executions:sizes     bytes of each finished execution (record + events)
//   hookgate:{s<k>}:executions:bytes     their sum
//
// Each shard holds its share of the byte budget (maxBytes / N); a listing merges the
// shards' indexes by creation time.
//
// Every key expires: records and events `ttlMs` after creation, the index keys `ttlMs`
// after the last save. A finished record keeps its bodies cut to `maxBodyBytes`
// (record-bounds.ts); a queued or running one keeps its input whole, because a worker
// (re)runs the execution from it. Finished executions are held to `maxBytes`: a save
// that goes over drops the oldest finished ones (never a queued or running one).
//
// Appending is one Lua script that skips events already stored (seq ≤ list length), so
// a worker streaming events one by one and the final whole-history append agree, and
// every event is published exactly once (whole), in order, as it is stored (maybe cut).
import type { RedisClient } from '../../api/records/redis-client.ts';
import { noEvictions, type BoundedStore, type BoundedStoreStats } from '../bounded.ts';
import {
  decodeCursor,
  DEFAULT_EXECUTION_TTL_MS,
  encodeCursor,
  isFinished,
  listLimit,
  MAX_LIST_LIMIT,
  type ExecutionStore,
} from './execution-store.ts';
import {
  ExecutionLayout,
  SINGLE_REDIS_LAYOUT,
  WORKER_GROUP,
  type ShardKeys,
} from './execution-keys.ts';
import type { Execution, ExecutionFilter, ExecutionPage, SequencedEvent } from './ports.ts';
import {
  boundEvent,
  boundExecution,
  carriesBody,
  DEFAULT_STORED_BODY_BYTES,
} from './record-bounds.ts';

/** The keys of one Redis with one shard (execution-keys.ts names every layout). */
export const EXECUTION_KEYS = SINGLE_REDIS_LAYOUT.shards[0] as ShardKeys;

/** An index entry and its record, as a listing reads them. */
interface Indexed {
  id: string;
  ms: number;
  json: string | null;
}

/** Default time a cut event stays whole in Redis (5 s). */
export const REDIS_HANDOVER_MS = 5_000;

/** Default byte budget of the finished executions in Redis (512 MiB). */
export const DEFAULT_REDIS_STORE_BYTES = 512 * 1024 * 1024;

// KEYS: record, index, finished, sizes, bytes, events. ARGV: 1 record JSON, 2 record ttl
// ms, 3 created ms, 4 id, 5 finished ('1'/'0'), 6 budget, 7 expiry cutoff ms, or '' when
// this process trimmed the shard's expired entries lately (trimDue), 8 record key prefix, 9 '1' to set the index keys' expiries again, '0' when this process did
// lately (refreshIndexExpiry), 10 their lifetime ms. Returns the number of records
// dropped. Only a finished record changes the budget: the expired and the oldest
// finished are dropped then.
const SAVE = `
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], 'NX', ARGV[3], ARGV[4])
local dropped = 0
local refresh = ARGV[9] ~= '0'
if ARGV[5] == '1' then
  local bytes = #ARGV[1]
  for _, e in ipairs(redis.call('LRANGE', KEYS[6], 0, -1)) do bytes = bytes + #e end
  -- Only a finished execution has a size: one finishing now has none to replace.
  local old = 0
  if redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4]) == 0 then
    old = tonumber(redis.call('HGET', KEYS[4], ARGV[4]) or '0')
  end
  redis.call('HSET', KEYS[4], ARGV[4], bytes)
  local total = redis.call('INCRBY', KEYS[5], bytes - old)
  -- The budget keys were empty (maybe made just now): they get their expiry at once.
  if total == bytes - old then refresh = true end
  local function forget(id)
    local b = tonumber(redis.call('HGET', KEYS[4], id) or '0')
    redis.call('HDEL', KEYS[4], id)
    total = redis.call('DECRBY', KEYS[5], b)
    redis.call('ZREM', KEYS[3], id)
    redis.call('ZREM', KEYS[2], id)
  end
  if ARGV[7] ~= '' then
    for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[7], 'LIMIT', 0, 1000)) do
      forget(id)
    end
  end
  local budget = tonumber(ARGV[6])
  while total > budget do
    local oldest = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
    if not oldest or oldest == ARGV[4] then break end
    redis.call('DEL', ARGV[8] .. oldest, ARGV[8] .. oldest .. ':events')
    forget(oldest)
    dropped = dropped + 1
  end
end
if refresh then
  for i = 2, 5 do redis.call('PEXPIRE', KEYS[i], ARGV[10]) end
end
return dropped
`;

// KEYS: events list, finished, sizes, bytes. ARGV: 1 ttl ms, 2 handover ms, 3 id, then
// (seq, stored JSON, whole JSON or '' when the same) triples in seq order. The new
// events go in one RPUSH; the list gets its expiry when this append creates it (the
// gateway's enqueue creates it with the 'queued' event). Events appended to a finished
// execution are added to its size (without the budget keys: not counted here).
const APPEND_EVENTS = `
local stored = redis.call('LLEN', KEYS[1])
local values = {}
local bytes = 0
for i = 4, #ARGV, 3 do
  if tonumber(ARGV[i]) > stored + #values then
    values[#values + 1] = ARGV[i + 1]
    if ARGV[i + 2] ~= '' then
      redis.call('SET', KEYS[1] .. ':' .. ARGV[i] .. ':whole', ARGV[i + 2], 'PX', ARGV[2])
      redis.call('PUBLISH', KEYS[1], ARGV[i + 2])
    else
      redis.call('PUBLISH', KEYS[1], ARGV[i + 1])
    end
    bytes = bytes + #ARGV[i + 1]
  end
end
if #values > 0 then
  redis.call('RPUSH', KEYS[1], unpack(values))
  if stored == 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
  if KEYS[2] and redis.call('ZSCORE', KEYS[2], ARGV[3]) then
    redis.call('HINCRBY', KEYS[3], ARGV[3], bytes)
    redis.call('INCRBY', KEYS[4], bytes)
  end
end
return #values
`;

/** A script's body as a Lua function of (K, A) instead of (KEYS, ARGV). */
const asFunction = (name: string, lua: string): string =>
  `local function ${name}(K, A)\n${lua.replaceAll('KEYS[', 'K[').replaceAll('#ARGV', '#A').replaceAll('ARGV[', 'A[')}\nend\n`;

// A record and events in one step: APPEND_EVENTS then SAVE, so that a terminal event is
// never stored beside a record still running (execution-store.ts, saveWithEvents), then
// the job's acknowledgement (XACK + XDEL) when one is given. KEYS: those of SAVE, then
// the shard's stream. ARGV: SAVE's ten, 11 consumer group, 12 stream entry id or '',
// then APPEND_EVENTS' (ttl ms, handover ms, id, triples).
const SAVE_WITH_EVENTS = `${asFunction('append', APPEND_EVENTS)}${asFunction('save', SAVE)}
local saveArgs, appendArgs = {}, {}
for i = 1, 10 do saveArgs[i] = ARGV[i] end
for i = 13, #ARGV do appendArgs[i - 12] = ARGV[i] end
-- Without the budget keys: the save after it counts every event of a finished record.
if #appendArgs > 3 then append({ KEYS[6] }, appendArgs) end
local dropped = save(KEYS, saveArgs)
if ARGV[12] ~= '' then
  redis.call('XACK', KEYS[7], ARGV[11], ARGV[12])
  redis.call('XDEL', KEYS[7], ARGV[12])
end
return dropped
`;

// KEYS: record, events list. The record and how many events it has, in one command
// (a worker reads both before it resumes a job).
const LOAD = `return { redis.call('GET', KEYS[1]) or false, redis.call('LLEN', KEYS[2]) }`;

// KEYS: a shard's stream. ARGV: consumer group, consumer, count, record key prefix. New
// jobs for the consumer (XREADGROUP, not blocking), each with its execution's record and
// event count: { entry id, fields, record or false, count } per job. The keys read are
// built from the job's id; they carry the stream's hash tag (execution-keys.ts), so
// they are in its slot on a Redis Cluster.
const TAKE = `
local read = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', ARGV[3], 'STREAMS', KEYS[1], '>')
local out = {}
if not read then return out end
for _, entry in ipairs(read[1][2]) do
  local fields = entry[2]
  local record, count = false, 0
  for i = 1, #fields - 1, 2 do
    if fields[i] == 'job' then
      local ok, job = pcall(cjson.decode, fields[i + 1])
      if ok and type(job) == 'table' and type(job.id) == 'string' then
        record = redis.call('GET', ARGV[4] .. job.id) or false
        count = redis.call('LLEN', ARGV[4] .. job.id .. ':events')
      end
    end
  end
  out[#out + 1] = { entry[1], fields, record, count }
end
return out
`;

/** A job read off a shard's stream by `take`, with its execution's record and event count. */
export interface TakenJob {
  entryId: string;
  fields: string[];
  execution: Execution | undefined;
  eventCount: number;
}

interface StoreCommands {
  hookgateSaveExecution(...args: (string | number)[]): Promise<number>;
  hookgateAppendEvents(...args: (string | number)[]): Promise<number>;
  hookgateLoadExecution(record: string, events: string): Promise<[string | null, number]>;
  hookgateSaveWithEvents(...args: (string | number)[]): Promise<number>;
  hookgateTakeJobs(
    stream: string,
    group: string,
    consumer: string,
    count: number,
    recordPrefix: string,
  ): Promise<[string, string[], string | null, number][]>;
}

export interface RedisExecutionStoreOptions {
  redis: RedisClient;
  /**
   * The key layout (HOOKGATE_QUEUE_SHARDS); every store, queue and worker of a
   * deployment uses the same. Default: one shard (tagged on a Redis Cluster).
   */
  layout?: ExecutionLayout;
  /** How long an execution and its events are kept after creation. Default 24 h. */
  ttlMs?: number;
  /**
   * Finished executions held at most, in bytes of JSON; oldest dropped first. Split
   * evenly over the shards (each holds maxBytes / N). Default 512 MiB.
   */
  maxBytes?: number;
  /** Bodies, outputs and response bodies of finished records larger than this are cut. Default 64 KiB. */
  maxBodyBytes?: number;
  /**
   * A cut event also stays whole this long (a key of its own), for a gateway that
   * subscribes just after the end. Default 5 s: the race it covers lasts a round trip,
   * and the whole results of that long are held on top of the budget.
   */
  handoverMs?: number;
  /** Clock (tests). */
  now?: () => number;
}

/** Ids read per round when a filtered list has to look further back. */
const SCAN_BATCH = 200;
/** Ids looked at, at most, for one page (bounds a filter that matches little). */
const SCAN_CAP = 20 * MAX_LIST_LIMIT;
/** Index entries older than the TTL are trimmed at most this often. */
const TRIM_EVERY_MS = 60_000;
/** How often a process sets the expiry of a shard's index keys again (their lifetime is the TTL). */
const EXPIRY_REFRESH_MS = 60_000;
/** How often a process drops a shard's expired finished entries (see #trimDue). */
const EXPIRED_TRIM_MS = 100;

export class RedisExecutionStore implements ExecutionStore, BoundedStore {
  readonly storeName = 'executions';
  readonly #redis: RedisClient & StoreCommands;
  /** Where every key of an execution and of its shard is. */
  readonly layout: ExecutionLayout;
  readonly #ttlMs: number;
  /** Each shard's share of the byte budget. */
  readonly #maxBytes: number;
  readonly #maxBodyBytes: number;
  readonly #handoverMs: number;
  readonly #now: () => number;
  readonly #evictions = noEvictions();
  #trimmedAt = 0;
  /** When this process last set each shard's index key expiries (refreshIndexExpiry). */
  readonly #expiryRefreshed = new Map<number, number>();
  /** When this process last dropped each shard's expired entries (#trimDue). */
  readonly #expiredTrimmed = new Map<number, number>();

  constructor(options: RedisExecutionStoreOptions) {
    const redis = options.redis as RedisClient & Partial<StoreCommands>;
    if (!redis.hookgateSaveExecution) {
      redis.defineCommand('hookgateSaveExecution', { numberOfKeys: 6, lua: SAVE });
    }
    if (!redis.hookgateAppendEvents) {
      redis.defineCommand('hookgateAppendEvents', { numberOfKeys: 4, lua: APPEND_EVENTS });
    }
    if (!redis.hookgateSaveWithEvents) {
      redis.defineCommand('hookgateSaveWithEvents', { numberOfKeys: 7, lua: SAVE_WITH_EVENTS });
    }
    if (!redis.hookgateTakeJobs) {
      redis.defineCommand('hookgateTakeJobs', { numberOfKeys: 1, lua: TAKE });
    }
    if (!redis.hookgateLoadExecution) {
      redis.defineCommand('hookgateLoadExecution', { numberOfKeys: 2, lua: LOAD });
    }
    this.#redis = redis as RedisClient & StoreCommands;
    this.#ttlMs = options.ttlMs ?? DEFAULT_EXECUTION_TTL_MS;
    this.layout = options.layout ?? new ExecutionLayout({ cluster: redis.isCluster === true });
    this.#maxBytes = Math.max(
      1,
      Math.floor((options.maxBytes ?? DEFAULT_REDIS_STORE_BYTES) / this.layout.shards.length),
    );
    this.#maxBodyBytes = options.maxBodyBytes ?? DEFAULT_STORED_BODY_BYTES;
    this.#handoverMs = options.handoverMs ?? REDIS_HANDOVER_MS;
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
    this.#evictions.bytes += await this.#redis.hookgateSaveExecution(...this.#saveArgs(execution));
    await this.#trimIndexes();
  }

  /**
   * The record and events of a run in one script, and the job's acknowledgement (on the
   * execution's shard's stream) when `acknowledge` names its entry (see
   * ExecutionStore.saveWithEvents).
   */
  async saveWithEvents(
    execution: Execution,
    events: SequencedEvent[],
    acknowledge?: string,
  ): Promise<void> {
    const { id } = execution;
    if (events.some((e) => e.executionId !== id))
      throw new Error(`saveWithEvents: events of another execution than ${id}`);
    const save = this.#saveArgs(execution);
    // SAVE's six keys, then the stream; SAVE's ten arguments after them.
    save.splice(6, 0, this.layout.of(id).stream);
    this.#evictions.bytes += await this.#redis.hookgateSaveWithEvents(
      ...save,
      WORKER_GROUP,
      acknowledge ?? '',
      ...this.#appendArgs(id, events),
    );
    await this.#trimIndexes();
  }

  /**
   * Up to `count` new jobs of a shard's stream for `consumer` (XREADGROUP, without
   * waiting), each with its execution's record and event count, in one script: what a
   * worker would otherwise read with one command per job.
   */
  async take(shard: ShardKeys, consumer: string, count: number): Promise<TakenJob[]> {
    const taken = await this.#redis.hookgateTakeJobs(
      shard.stream,
      WORKER_GROUP,
      consumer,
      count,
      shard.recordPrefix,
    );
    return taken.map(([entryId, fields, json, eventCount]) => ({
      entryId,
      fields,
      execution: this.#parse(json),
      eventCount,
    }));
  }

  /**
   * Whether a write on `shard` should set its index keys' expiries again (their
   * lifetime is the TTL): when this process has not for a minute. The keys of a
   * deployment that stopped still go, and most writes spend no commands on it.
   */
  refreshIndexExpiry(shard: ShardKeys): boolean {
    return this.#due(this.#expiryRefreshed, shard, EXPIRY_REFRESH_MS);
  }

  /**
   * Whether a finished save on `shard` should drop its expired entries (up to 1,000):
   * at most every 100 ms per process, so most saves spend no command on it; 10,000 a
   * second per process keeps up with any rate one Redis takes.
   */
  #trimDue(shard: ShardKeys): boolean {
    return this.#due(this.#expiredTrimmed, shard, EXPIRED_TRIM_MS);
  }

  /** Whether `everyMs` has passed since `last` says the shard's was done; notes it done. */
  #due(last: Map<number, number>, shard: ShardKeys, everyMs: number): boolean {
    const now = this.#now();
    if (now - (last.get(shard.shard) ?? -Infinity) < everyMs) return false;
    last.set(shard.shard, now);
    return true;
  }

  /** SAVE's keys and arguments. */
  #saveArgs(execution: Execution): (string | number)[] {
    const created = Date.parse(execution.createdAt) || this.#now();
    const finished = isFinished(execution);
    const kept = finished ? boundExecution(execution, this.#maxBodyBytes) : execution;
    const keys = this.layout.of(execution.id);
    return [
      keys.record(execution.id),
      keys.index,
      keys.finished,
      keys.sizes,
      keys.bytes,
      keys.events(execution.id),
      JSON.stringify(kept),
      this.ttlLeftMs(execution.createdAt),
      created,
      execution.id,
      finished ? '1' : '0',
      this.#maxBytes,
      finished && this.#trimDue(keys) ? this.#now() - this.#ttlMs : '',
      keys.recordPrefix,
      this.refreshIndexExpiry(keys) ? '1' : '0',
      this.#ttlMs,
    ];
  }

  /** APPEND_EVENTS' arguments (after its keys) for events of one execution. */
  #appendArgs(id: string, events: SequencedEvent[]): (string | number)[] {
    return [
      this.#ttlMs,
      this.#handoverMs,
      id,
      ...events.flatMap((e) => {
        const whole = JSON.stringify(e);
        const cut = carriesBody(e) ? boundEvent(e, this.#maxBodyBytes) : e;
        return cut === e ? [String(e.seq), whole, ''] : [String(e.seq), JSON.stringify(cut), whole];
      }),
    ];
  }

  async #trimIndexes(): Promise<void> {
    if (this.#now() - this.#trimmedAt > TRIM_EVERY_MS) {
      this.#trimmedAt = this.#now();
      const cutoff = `(${this.#now() - this.#ttlMs}`;
      await Promise.all(
        this.layout.shards.map((shard) =>
          this.#redis.zremrangebyscore(shard.index, '-inf', cutoff),
        ),
      );
    }
  }

  async get(id: string): Promise<Execution | undefined> {
    return this.#parse(await this.#redis.get(this.layout.of(id).record(id)));
  }

  /** The record and the number of its events, in one command (what a worker resumes from). */
  async load(id: string): Promise<{ execution: Execution | undefined; eventCount: number }> {
    const keys = this.layout.of(id);
    const [json, eventCount] = await this.#redis.hookgateLoadExecution(
      keys.record(id),
      keys.events(id),
    );
    return { execution: this.#parse(json), eventCount };
  }

  #parse(json: string | null): Execution | undefined {
    if (!json) return undefined;
    const execution = JSON.parse(json) as Execution;
    // Redis expires the key on its own; this hides it on the store's clock too.
    return this.#expired(execution) ? undefined : execution;
  }

  async list(filter: ExecutionFilter): Promise<Execution[]> {
    return (await this.page(filter)).items;
  }

  async page(filter: ExecutionFilter): Promise<ExecutionPage> {
    const limit = listLimit(filter);
    const maxBytes = filter.maxBytes ?? Infinity;
    const after = filter.cursor ? decodeCursor(filter.cursor) : undefined;
    const items: Execution[] = [];
    let bytes = 0;
    /** The last id looked at. */
    let last: { ms: number; id: string } | undefined;
    let looked = 0;
    for await (const { id, ms, json } of this.#scan(filter, limit)) {
      looked++;
      // Same time as the cursor: members come in reverse order, after it come smaller ids.
      if (after && ms === after.ms && id >= after.key) continue;
      const e = json ? (JSON.parse(json) as Execution) : undefined;
      if (json && e && this.#matches(e, filter)) {
        // Full (by count or bytes): the next page continues after the last one shown.
        if (items.length === limit || (items.length > 0 && bytes + json.length > maxBytes))
          return {
            items,
            ...(last ? { next: encodeCursor({ ms: last.ms, key: last.id }) } : {}),
          };
        items.push(e);
        bytes += json.length;
      }
      last = { ms, id };
    }
    // The scan cap cut the search short: the next page looks further back.
    if (looked >= SCAN_CAP && last)
      return { items, next: encodeCursor({ ms: last.ms, key: last.id }) };
    return { items };
  }

  /**
   * Every shard's index merged, newest first (creation time, then id, both descending,
   * the order one index has), with the records; at most SCAN_CAP ids (a filter that
   * matches little). Each shard is read in batches as the merge gets to them.
   */
  async *#scan(filter: ExecutionFilter, limit: number): AsyncGenerator<Indexed> {
    const cutoff = this.#now() - this.#ttlMs;
    const since = Math.max(cutoff, filter.since ? Date.parse(filter.since) : cutoff);
    const untilMs = filter.until ? Date.parse(filter.until) : undefined;
    const after = filter.cursor ? decodeCursor(filter.cursor) : undefined;
    let max = untilMs !== undefined ? `(${untilMs}` : '+inf';
    if (after && (untilMs === undefined || after.ms < untilMs)) max = String(after.ms);
    const shards = this.layout.shards;
    // One shard: batches as before. Several: a page's worth from each first (a page
    // takes ~limit ids of all of them together), growing while a filter skips.
    const first = shards.length === 1 ? SCAN_BATCH : Math.min(SCAN_BATCH, Math.max(16, limit + 1));
    const readers = shards.map((shard) => this.#readIndex(shard, max, since, first));
    const heads = await Promise.all(readers.map((r) => r.next()));
    for (let looked = 0; looked < SCAN_CAP; looked++) {
      let pick = -1;
      for (let k = 0; k < heads.length; k++) {
        const head = heads[k] as IteratorResult<Indexed>;
        if (head.done) continue;
        const best = pick < 0 ? undefined : (heads[pick] as IteratorYieldResult<Indexed>).value;
        const v = head.value;
        if (!best || v.ms > best.ms || (v.ms === best.ms && v.id > best.id)) pick = k;
      }
      if (pick < 0) return;
      yield (heads[pick] as IteratorYieldResult<Indexed>).value;
      heads[pick] = await (readers[pick] as AsyncGenerator<Indexed>).next();
    }
  }

  /** One shard's index from `max` down to `since`, with the records, in growing batches. */
  async *#readIndex(
    shard: ShardKeys,
    max: string,
    since: number,
    first: number,
  ): AsyncGenerator<Indexed> {
    let size = first;
    for (let offset = 0; offset < SCAN_CAP; offset += size, size = Math.min(SCAN_BATCH, size * 2)) {
      const raw = await this.#redis.zrevrangebyscore(
        shard.index,
        max,
        since,
        'WITHSCORES',
        'LIMIT',
        offset,
        size,
      );
      const ids: string[] = [];
      for (let i = 0; i < raw.length; i += 2) ids.push(raw[i] as string);
      // The records of one shard share its tag: one MGET, on a cluster too.
      const records =
        ids.length > 0 ? await this.#redis.mget(ids.map((id) => shard.record(id))) : [];
      for (let i = 0; i < ids.length; i++)
        yield { id: ids[i] as string, ms: Number(raw[2 * i + 1]), json: records[i] ?? null };
      if (ids.length < size) return;
    }
  }

  #matches(e: Execution, filter: ExecutionFilter): boolean {
    if (this.#expired(e)) return false;
    if (filter.workflowId !== undefined && e.workflowId !== filter.workflowId) return false;
    if (filter.triggerKey !== undefined && e.triggerKey !== filter.triggerKey) return false;
    if (filter.status !== undefined && e.status !== filter.status) return false;
    return true;
  }

  async appendEvents(events: SequencedEvent[]): Promise<void> {
    const byExecution = new Map<string, SequencedEvent[]>();
    for (const event of events) {
      const list = byExecution.get(event.executionId) ?? [];
      list.push(event);
      byExecution.set(event.executionId, list);
    }
    await Promise.all(
      [...byExecution].map(([id, list]) => {
        const keys = this.layout.of(id);
        return this.#redis.hookgateAppendEvents(
          keys.events(id),
          keys.finished,
          keys.sizes,
          keys.bytes,
          ...this.#appendArgs(id, list),
        );
      }),
    );
  }

  async events(id: string, afterSeq: number): Promise<SequencedEvent[]> {
    // Seqs are 1, 2, 3… in list order, so the events after `afterSeq` start at that index.
    const keys = this.layout.of(id);
    const raw = await this.#redis.lrange(keys.events(id), Math.max(0, afterSeq), -1);
    const events = raw
      .map((json) => JSON.parse(json) as SequencedEvent)
      .filter((e) => e.seq > afterSeq);
    const cut = events.filter((e) => 'truncated' in e && e.truncated);
    if (cut.length === 0) return events;
    // Cut ones still whole for a while (a caller that starts waiting just after the end).
    const wholes = await this.#redis.mget(cut.map((e) => keys.whole(id, e.seq)));
    const bySeq = new Map<number, SequencedEvent>();
    wholes.forEach((json, i) => {
      if (json) bySeq.set((cut[i] as SequencedEvent).seq, JSON.parse(json) as SequencedEvent);
    });
    return events.map((e) => bySeq.get(e.seq) ?? e);
  }

  /** Bytes and number of the finished executions held (all shards), and those dropped by this process. */
  async stats(): Promise<BoundedStoreStats> {
    const shards = await Promise.all(
      this.layout.shards.map((shard) =>
        Promise.all([this.#redis.get(shard.bytes), this.#redis.zcard(shard.finished)]),
      ),
    );
    let bytes = 0;
    let entries = 0;
    for (const [b, n] of shards) {
      bytes += Number(b ?? 0);
      entries += n;
    }
    return { bytes, entries, evictions: { ...this.#evictions } };
  }

  #expired(execution: Execution): boolean {
    return Date.parse(execution.createdAt) < this.#now() - this.#ttlMs;
  }
}
