// Redis adapter of the executions store, shared by gateways (which create the queued
// record and read executions for the API) and workers (which run them). Keys of one
// shard (execution-keys.ts; on one Redis with one shard without the `{s<k>}` tag):
//
//   hookgate:{s<k>}:execution:<id>        the execution, one hash (ADR 0026), expiring
//                                         once finished (below):
//                                           r      the record without its input (JSON)
//                                           i      the input (JSON): written with the
//                                                  queued record, again only when a
//                                                  finished record has it cut
//                                           c      its creation time (ms): set once, when
//                                                  the record is first written and indexed
//                                           n      how many events it has
//                                           eb     their bytes
//                                           e:<p>  the event at position p = 1 … n (JSON;
//                                                  its seq is p for a run's own events)
//                                           w      set when a gateway first listens for its
//                                                  events (watchEvents): only then are new
//                                                  events published
//   hookgate:{s<k>}:execution:<id>:whole:<seq>  a cut event whole, for `handoverMs` (5 s)
//   hookgate:{s<k>}:execution:<id>:tombstone    what a discarded success that came with an
//                                        Idempotency-Key leaves: its outcome and when
//                                        (ms), for the key's window (DISCARD)
//   hookgate:{s<k>}:exec:<id>:events      the pub/sub channel each new event is published on
//   hookgate:{s<k>}:executions           index: sorted set of ids scored by creation time (ms)
//   hookgate:{s<k>}:executions:finished  finished executions, scored by when their hash
//                                        expires less a lifetime (their creation time, or
//                                        later for one kept longer): the ones the byte
//                                        budget may drop, the first to expire first, and
//                                        the ones dropped from the index once expired
//   hookgate:{s<k>}:executions:sizes     bytes of each finished execution (record + events;
//                                        kept apart from the hash: an expired hash's size
//                                        is still needed to take it off the sum)
//   hookgate:{s<k>}:executions:bytes     their sum
//   hookgate:{s<k>}:executions:held      finished executions held for their dead-letter
//                                        entries (HeldRecords: the budget does not drop
//                                        them), scored as in the finished set, which
//                                        does not have them; their sizes are in `sizes`
//                                        and `bytes` too
//   hookgate:{s<k>}:executions:heldbytes their sum
//
// Each shard holds its share of the byte budget (maxBytes / N); a listing merges the
// shards' indexes by creation time.
//
// Every key expires: a finished execution `ttlMs` after its creation (at least
// FINISHED_GRACE_MS after it finished; a queued or running one enqueued by a gateway has
// no expiry until then, so a job waiting longer than the TTL still finds its record; a
// dead-lettered one a lifetime and a minute after it finished, outliving its dead-letter
// entry: ADR 0039), the index keys `indexTtlMs` after the last save. Listings show
// what reads by id show: every indexed execution not finished, the finished ones until
// they expire (the index loses them then, with the finished set). A finished record
// keeps its bodies cut to `maxBodyBytes`
// (record-bounds.ts); a queued or running one keeps its input whole, because a worker
// (re)runs the execution from it. Finished executions are held to `maxBytes`: a save
// that goes over drops the finished ones that expire first (never a queued or running
// one, nor one held for its dead-letter entry: those may take half of the budget, and
// the dead-letter list drops the oldest entries, then their records, beyond that).
//
// The input is apart from the rest of the record because it is most of its bytes and
// never changes while the execution runs: a worker's saves do not send it again (Redis
// hashes every byte a script is given; ADR 0026). A record from before (input inside
// `r`, no `i`) is read as it is.
//
// Every write is one Lua script (WRITE, in execution-scripts-redis.ts): it reads the event count and bytes (HMGET),
// skips events already stored (seq ≤ count), so a worker streaming events one by one and
// the final whole-history append agree, publishes every new event exactly once (whole),
// in order, when the execution is watched, and writes record and events with one HSET.
// A take reads a job's record and event count with one HMGET.
//
// Watched: a gateway subscribes to the channel first, then marks the execution watched
// and reads its stored events in one script (watchEvents). Scripts run one at a time, so
// each write comes either before that script (its events are in the history read) or
// after (it sees the mark and publishes them to a subscription that exists): nothing
// falls between. Nobody listens to most executions (Immediate ACK, nobody watching the
// run), and a PUBLISH is a tenth of a finish's work in Redis, sent to every node of a
// Redis Cluster.
import type { RedisClient } from '../../api/records/redis-client.ts';
import { noEvictions, type BoundedStore, type BoundedStoreStats } from '../bounded.ts';
import type { HeldRecord, HeldRecords, ReleasedRecord } from './dead-letters.ts';
import {
  deadLetteredUntil,
  decodeCursor,
  DEFAULT_EXECUTION_TTL_MS,
  encodeCursor,
  FINISHED_GRACE_MS,
  type Cursor,
  isFinished,
  listLimit,
  MAX_LIST_LIMIT,
  type DiscardOptions,
  type ExecutionStore,
  type Tombstone,
} from './execution-store.ts';
import {
  defineExecutionScripts,
  type EventsReadMode,
  type ExecutionScripts,
} from './execution-scripts-redis.ts';
import {
  EXECUTION_FIELDS as F,
  ExecutionLayout,
  SINGLE_REDIS_LAYOUT,
  WORKER_GROUP,
  type ShardKeys,
} from './execution-keys.ts';
import type { Execution, ExecutionFilter, ExecutionPage, SequencedEvent } from './ports.ts';
import { recordJson, withStoredInput } from './execution-record-redis.ts';
import {
  boundEvent,
  boundExecution,
  carriesBody,
  DEFAULT_STORED_BODY_BYTES,
} from './record-bounds.ts';

/** The keys of one Redis with one shard (execution-keys.ts names every layout). */
export const EXECUTION_KEYS = SINGLE_REDIS_LAYOUT.shards[0] as ShardKeys;

/** The keys of WRITE and DISCARD (execution-scripts-redis.ts), in their order. */
function finishingKeys(keys: ShardKeys, id: string): string[] {
  return [keys.execution(id), keys.index, keys.finished, keys.sizes, keys.bytes, keys.stream];
}

/** An index entry and its record, as a listing reads them. */
interface Indexed {
  id: string;
  ms: number;
  /** The record without its input, and the input (see the top). */
  json: string | null;
  input: string | null;
}

/** Default time a cut event stays whole in Redis (5 s). */
export const REDIS_HANDOVER_MS = 5_000;

/** Default byte budget of the finished executions in Redis (512 MiB). */
export const DEFAULT_REDIS_STORE_BYTES = 512 * 1024 * 1024;

/**
 * On an input a store read from Redis or wrote there: which store, and which execution's
 * field `i` holds it with how many bytes. A symbol key, which JSON and structuredClone
 * leave out, on the input itself: a WeakMap cost each save a lookup and each read an
 * ephemeron for the scavenger. A copy (a spread) carries the key but is another object,
 * so the mark names the very input it is for.
 */
const HELD_AS = Symbol('held in Redis as');
type Marked = {
  [HELD_AS]?: { store: RedisExecutionStore; input: object; id: string; bytes: number };
};

/** A job read off a shard's stream by `take`, with its execution's record and event count. */
export interface TakenJob {
  entryId: string;
  fields: string[];
  execution: Execution | undefined;
  eventCount: number;
}

export interface RedisExecutionStoreOptions {
  redis: RedisClient;
  /**
   * The key layout (HOOKGATE_QUEUE_SHARDS); every store, queue and worker of a
   * deployment uses the same. Default: one shard (tagged on a Redis Cluster).
   */
  layout?: ExecutionLayout;
  /**
   * How long a finished execution and its events are kept after creation (at least a
   * minute after it finished; a dead-lettered one a lifetime and a minute after it was
   * dead-lettered). Default 24 h.
   */
  ttlMs?: number;
  /**
   * Finished executions held at most, in bytes of JSON; the first to expire (the oldest,
   * unless kept longer) dropped first. Split evenly over the shards (each holds
   * maxBytes / N). Default 512 MiB.
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
  /**
   * Index entries a page of a listing looks at, at most (default 20,000): a filter, or the
   * caller's access, that matches little ends its page there, short, with a `next` that
   * goes on further back (page).
   */
  listScanCap?: number;
  /** Clock (tests). */
  now?: () => number;
}

/** Ids read per round when a filtered list has to look further back. */
const SCAN_BATCH = 200;
/** Ids looked at, at most, for one page (bounds a filter that matches little). */
export const LIST_SCAN_CAP = 20 * MAX_LIST_LIMIT;
/**
 * How often a process sets the expiry of a shard's index keys again (their lifetime,
 * indexTtlMs, is the TTL and this, and the grace: they outlive every hash they name).
 */
const EXPIRY_REFRESH_MS = 60_000;
/** How often a process drops a shard's expired finished entries (see #trimDue). */
const EXPIRED_TRIM_MS = 100;

export class RedisExecutionStore implements ExecutionStore, BoundedStore, HeldRecords {
  readonly storeName = 'executions';
  readonly #redis: RedisClient & ExecutionScripts;
  /** Where every key of an execution and of its shard is. */
  readonly layout: ExecutionLayout;
  readonly #ttlMs: number;
  /** Each shard's share of the byte budget. */
  readonly #maxBytes: number;
  readonly #maxBodyBytes: number;
  readonly #handoverMs: number;
  readonly #scanCap: number;
  readonly #now: () => number;
  readonly #evictions = noEvictions();
  /** When this process last set each shard's index key expiries (refreshIndexExpiry). */
  readonly #expiryRefreshed = new Map<number, number>();
  /** When this process last dropped each shard's expired entries (#trimDue). */
  readonly #expiredTrimmed = new Map<number, number>();

  constructor(options: RedisExecutionStoreOptions) {
    const redis = options.redis;
    defineExecutionScripts(redis);
    this.#redis = redis as RedisClient & ExecutionScripts;
    this.#ttlMs = options.ttlMs ?? DEFAULT_EXECUTION_TTL_MS;
    this.layout = options.layout ?? new ExecutionLayout({ cluster: redis.isCluster === true });
    this.#maxBytes = Math.max(
      1,
      Math.floor((options.maxBytes ?? DEFAULT_REDIS_STORE_BYTES) / this.layout.shards.length),
    );
    this.#maxBodyBytes = options.maxBodyBytes ?? DEFAULT_STORED_BODY_BYTES;
    this.#handoverMs = options.handoverMs ?? REDIS_HANDOVER_MS;
    this.#scanCap = Math.max(1, options.listScanCap ?? LIST_SCAN_CAP);
    this.#now = options.now ?? Date.now;
  }

  #ttlLeft(createdMs: number): number {
    return Math.max(1_000, createdMs + this.#ttlMs - this.#now());
  }

  /**
   * The bytes in Redis of `input` when this store read it from there or wrote it as the
   * input of execution `id`: a save of a record holding that very input does not send
   * it again. Undefined otherwise.
   */
  #storedBytes(input: object, id: string): number | undefined {
    const mark = (input as Marked)[HELD_AS];
    return mark?.store === this && mark.input === input && mark.id === id ? mark.bytes : undefined;
  }

  /** Notes `input` held in Redis as execution `id`'s (undefined: no longer held whole). */
  #noteStored(input: object, held: { id: string; bytes: number } | undefined): void {
    (input as Marked)[HELD_AS] = held && { store: this, input, ...held };
  }

  get ttlMs(): number {
    return this.#ttlMs;
  }

  /**
   * The lifetime of a shard's index keys, set again by a write at most every minute
   * (refreshIndexExpiry): past the longest a finished hash lives after its write (a
   * dead-lettered one's lifetime and grace), so a shard that goes quiet lists its
   * executions until the last of them expires.
   */
  get indexTtlMs(): number {
    return this.#ttlMs + FINISHED_GRACE_MS + EXPIRY_REFRESH_MS;
  }

  async save(execution: Execution): Promise<void> {
    await this.saveWithEvents(execution, []);
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
    const { args, sentInput } = this.#writeArgs(id, execution, acknowledge, events);
    this.#evictions.bytes += await this.#redis.hookgateWriteExecution(...args);
    if (sentInput) this.#noteStored(sentInput.input, { id, bytes: sentInput.bytes });
  }

  /**
   * ExecutionStore.discard, in one script (DISCARD, execution-scripts-redis.ts): the hash
   * and its whole copies go, or (watched) its new events are stored and published and it
   * stays, without record and input, for the handover time; off the index, and off the
   * budget when `finished` says a finished record was saved before; the job acknowledged;
   * its tombstone left for `tombstoneMs` when given.
   */
  async discard(
    execution: Execution,
    events: SequencedEvent[],
    // `watched` is not read: the mark on the execution's hash says (ExecutionStore.discard).
    options: DiscardOptions = {},
  ): Promise<void> {
    const { id } = execution;
    if (events.some((e) => e.executionId !== id))
      throw new Error(`discard: events of another execution than ${id}`);
    const keys = this.layout.of(id);
    const args: (string | number)[] = [
      ...finishingKeys(keys, id),
      id,
      WORKER_GROUP,
      options.acknowledge ?? '',
      options.finished === true ? '1' : '0',
      this.#handoverMs,
      keys.channel(id),
      options.tombstoneMs === undefined ? '' : this.#tombstone(execution, options.tombstoneMs),
    ];
    for (const e of events) args.push(e.seq, JSON.stringify(e));
    await this.#redis.hookgateDiscardExecution(...args);
  }

  /** DISCARD's tombstone argument: '<lifetime ms>:<finished ms>'. */
  #tombstone(execution: Execution, ms: number): string {
    const finished = Date.parse(execution.finishedAt ?? '');
    const at = Number.isNaN(finished) ? this.#now() : finished;
    return `${Math.max(1, Math.ceil(ms))}:${Math.max(0, Math.floor(at))}`;
  }

  /** ExecutionStore.discarded: the tombstone DISCARD left, one GET. */
  async discarded(id: string): Promise<Tombstone | undefined> {
    const text = await this.#redis.get(this.layout.of(id).tombstone(id));
    return text === null ? undefined : parseTombstone(text);
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
      shard.executionPrefix,
    );
    return taken.map(([entryId, fields, json, input, eventCount]) => ({
      entryId,
      fields,
      execution: this.#parse(json, input),
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

  /**
   * WRITE's keys and arguments: the record when given (without: events only), the
   * events (those already stored are skipped by the script), the acknowledgement.
   */
  #writeArgs(
    id: string,
    execution: Execution | undefined,
    acknowledge: string | undefined,
    events: SequencedEvent[],
  ): { args: (string | number)[]; sentInput?: { input: object; bytes: number } } {
    const keys = this.layout.of(id);
    const args: (string | number)[] = finishingKeys(keys, id);
    let input = '';
    let inputBytes = 0;
    let deadLettered = '0';
    let sentInput: { input: object; bytes: number } | undefined;
    if (execution) {
      const finished = isFinished(execution);
      const kept = finished ? boundExecution(execution, this.#maxBodyBytes) : execution;
      // Sent when Redis may not hold this very input: a record not read from it, or
      // one whose input was cut just now.
      const stored = this.#storedBytes(kept.input, id);
      if (stored !== undefined) inputBytes = stored;
      else {
        input = JSON.stringify(kept.input);
        inputBytes = input.length;
        sentInput = { input: kept.input, bytes: inputBytes };
        // Cut now: Redis will no longer hold the whole one.
        if (kept.input !== execution.input) this.#noteStored(execution.input, undefined);
      }
      const createdMs = Date.parse(execution.createdAt) || this.#now();
      const left = finished ? this.#finishedLeft(kept, createdMs) : this.#ttlLeft(createdMs);
      if (finished && kept.deadLetteredAt !== undefined) deadLettered = '1';
      args.push(
        recordJson(kept),
        left,
        createdMs,
        id,
        // Its expiry less a lifetime: the expired trim and the budget read it so.
        finished ? Math.max(createdMs, this.#now() + left - this.#ttlMs) : '',
        this.#maxBytes,
        finished && this.#trimDue(keys) ? this.#now() - this.#ttlMs : '',
        keys.executionPrefix,
        this.refreshIndexExpiry(keys) ? '1' : '0',
        this.indexTtlMs,
      );
    } else {
      // Events only: a hash this creates lives the whole TTL; nothing is indexed.
      args.push('', this.#ttlMs, 0, id, '', 0, '', keys.executionPrefix, '0', 0);
    }
    args.push(
      WORKER_GROUP,
      acknowledge ?? '',
      this.#handoverMs,
      keys.channel(id),
      input,
      inputBytes,
      deadLettered,
    );
    for (const e of events) {
      const whole = JSON.stringify(e);
      const cut = carriesBody(e) ? boundEvent(e, this.#maxBodyBytes) : e;
      if (cut === e) args.push(e.seq, whole, '');
      else args.push(e.seq, JSON.stringify(cut), whole);
    }
    return sentInput ? { args, sentInput } : { args };
  }

  /**
   * What a finished record's hash has left to live: its lifetime from creation, at least
   * FINISHED_GRACE_MS (one that waited in the queue past its lifetime); a dead-lettered
   * one until a lifetime and that minute after its dead-lettering (deadLetteredUntil),
   * so it outlives its dead-letter entry (ADR 0039) and a later save (its callback's
   * outcome) does not push that further, as the reads and the memory store count it.
   */
  #finishedLeft(execution: Execution, createdMs: number): number {
    const whole = this.#ttlMs + FINISHED_GRACE_MS;
    if (execution.deadLetteredAt !== undefined) {
      const left = deadLetteredUntil(execution.deadLetteredAt, this.#ttlMs) - this.#now();
      return Number.isNaN(left) ? whole : Math.min(whole, Math.max(left, FINISHED_GRACE_MS));
    }
    return Math.max(this.#ttlLeft(createdMs), FINISHED_GRACE_MS);
  }

  async get(id: string): Promise<Execution | undefined> {
    const [json, input] = await this.#redis.hmget(
      this.layout.of(id).execution(id),
      F.record,
      F.input,
    );
    return this.#parse(json ?? null, input ?? null);
  }

  /** The record and the number of its events, in one command (what a worker resumes from). */
  async load(id: string): Promise<{ execution: Execution | undefined; eventCount: number }> {
    const [json, input, count] = await this.#redis.hmget(
      this.layout.of(id).execution(id),
      F.record,
      F.input,
      F.eventCount,
    );
    return {
      execution: this.#parse(json ?? null, input ?? null),
      eventCount: Number(count ?? 0),
    };
  }

  /**
   * A record as stored (`r`) with its input (`i`; none in a record from before the input
   * was apart). The input read is noted as the one Redis holds for the execution.
   */
  #parse(json: string | null, input: string | null): Execution | undefined {
    if (!json) return undefined;
    const execution = JSON.parse(json) as Execution;
    // Redis expires a finished one on its own; this hides it on the store's clock too.
    if (this.#expired(execution)) return undefined;
    withStoredInput(execution, input);
    if (input) this.#noteStored(execution.input, { id: execution.id, bytes: input.length });
    return execution;
  }

  async list(filter: ExecutionFilter): Promise<Execution[]> {
    return (await this.page(filter)).items;
  }

  /**
   * One page: the matching executions the caller may read (`triggerReadable`, asked as
   * they come), newest first, looking at `listScanCap` index entries at most. `next` is
   * the last item shown when another follows; when the bound cut the page short, a time
   * alone (resumeBefore), so that it names none of the executions passed over.
   */
  async page(filter: ExecutionFilter): Promise<ExecutionPage> {
    const limit = listLimit(filter);
    const maxBytes = filter.maxBytes ?? Infinity;
    const after = filter.cursor ? decodeCursor(filter.cursor) : undefined;
    const items: Execution[] = [];
    let bytes = 0;
    /** The last item shown; the first and last entries looked at past the cursor. */
    let shown: { ms: number; id: string } | undefined;
    let first: number | undefined;
    let last: number | undefined;
    let looked = 0;
    for await (const { id, ms, json, input } of this.#scan(filter, limit)) {
      looked++;
      if (after && shownBefore(after, ms, id)) continue;
      first ??= ms;
      last = ms;
      const e = json ? await this.#listed(json, filter) : undefined;
      if (!json || !e) continue;
      const size = json.length + (input?.length ?? 0);
      // Full (by count or bytes): the next page continues after the last one shown.
      if (shown && (items.length === limit || bytes + size > maxBytes))
        return { items, next: encodeCursor({ ms: shown.ms, key: shown.id }) };
      items.push(withStoredInput(e, input));
      bytes += size;
      shown = { ms, id };
    }
    // The bound cut the search short: the next page looks further back.
    const next = looked < this.#scanCap ? undefined : pastBound(shown, first, last);
    return next ? { items, next } : { items };
  }

  /** The record of an index entry, when the filter and the caller's access list it. */
  async #listed(json: string, filter: ExecutionFilter): Promise<Execution | undefined> {
    const e = JSON.parse(json) as Execution;
    if (!this.#matches(e, filter)) return undefined;
    const readable = filter.triggerReadable;
    if (readable && !(await readable(e.triggerKey))) return undefined;
    return e;
  }

  /**
   * Every shard's index merged, newest first (creation time, then id, both descending,
   * the order one index has), with the records; at most `listScanCap` ids (a filter that
   * matches little). Each shard is read in batches as the merge gets to them.
   */
  async *#scan(filter: ExecutionFilter, limit: number): AsyncGenerator<Indexed> {
    // No lifetime cut: a queued execution that waited longer is listed (ADR 0036), and
    // the index loses the finished ones as they expire.
    const since = filter.since ? Date.parse(filter.since) : '-inf';
    const untilMs = filter.until ? Date.parse(filter.until) : undefined;
    const after = filter.cursor ? decodeCursor(filter.cursor) : undefined;
    let max = untilMs !== undefined ? `(${untilMs}` : '+inf';
    // A cursor of a time alone: before it.
    if (after && (untilMs === undefined || after.ms < untilMs))
      max = after.key === undefined ? `(${after.ms}` : String(after.ms);
    const shards = this.layout.shards;
    // One shard: batches as before. Several: a page's worth from each first (a page
    // takes ~limit ids of all of them together), growing while a filter skips.
    const first = shards.length === 1 ? SCAN_BATCH : Math.min(SCAN_BATCH, Math.max(16, limit + 1));
    const readers = shards.map((shard) => this.#readIndex(shard, max, since, first));
    const heads = await Promise.all(readers.map((r) => r.next()));
    for (let looked = 0; looked < this.#scanCap; looked++) {
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

  /**
   * One shard's index from `max` down to `since`, with the records, in growing batches.
   * Each batch starts at the score of the last entry read (inclusive; those read already
   * are passed over), not at an offset: executions indexed meanwhile above it, and
   * entries taken off (expired, dropped by the budget, #forgetGone), move every offset,
   * which made a batch read again the end of the one before or pass over the start of
   * its own.
   */
  async *#readIndex(
    shard: ShardKeys,
    max: string,
    since: number | '-inf',
    first: number,
  ): AsyncGenerator<Indexed> {
    let size = first;
    let top = max;
    /**
     * The last entry read, and how many of its batch have its score and an id not below
     * its: the next batch, whose bound is its score (inclusive), reads them again.
     */
    let last: { ms: number; id: string } | undefined;
    let again = 0;
    for (let read = 0; read < this.#scanCap; read += size, size = Math.min(SCAN_BATCH, size * 2)) {
      const want = size + again;
      const raw = await this.#redis.zrevrangebyscore(
        shard.index,
        top,
        since,
        'WITHSCORES',
        'LIMIT',
        0,
        want,
      );
      const ids: string[] = [];
      const scores: number[] = [];
      for (let i = 0; i < raw.length; i += 2) {
        const id = raw[i] as string;
        const ms = Number(raw[i + 1]);
        // Same score as the last one read: members come in reverse order.
        if (last && ms === last.ms && id >= last.id) continue;
        ids.push(id);
        scores.push(ms);
      }
      // The executions of one shard share its tag: one script, on a cluster too.
      const records =
        ids.length > 0
          ? await this.#redis.hookgateReadRecords(
              ids.length,
              ...ids.map((id) => shard.execution(id)),
            )
          : [];
      await this.#forgetGone(shard, ids, scores, records);
      for (let i = 0; i < ids.length; i++)
        yield {
          id: ids[i] as string,
          ms: scores[i] as number,
          json: records[2 * i] ?? null,
          input: records[2 * i + 1] ?? null,
        };
      // Fewer than asked for: the index has no more from `top` down.
      if (raw.length < 2 * want) return;
      if (ids.length > 0) last = { ms: scores.at(-1) as number, id: ids.at(-1) as string };
      const at = last as { ms: number; id: string };
      top = String(at.ms);
      again = 0;
      for (let i = 0; i < raw.length; i += 2)
        if (Number(raw[i + 1]) === at.ms && (raw[i] as string) >= at.id) again++;
    }
  }

  /**
   * Takes off the index the entries of a batch read whose hash has gone although it was
   * older than a lifetime: the expired trim of the finished set drops every finished one
   * that expires, but a hash may go otherwise (a queued one from a gateway before ADR
   * 0036, which expired; removed by hand). Rare: most batches have none.
   */
  async #forgetGone(
    shard: ShardKeys,
    ids: string[],
    /** Their scores (creation times). */
    scores: number[],
    /** (record, input) pairs, one per id: a record at twice the id's position. */
    records: (string | null)[],
  ): Promise<void> {
    const cutoff = this.#now() - this.#ttlMs;
    const gone: string[] = [];
    for (let i = 0; i < ids.length; i++)
      if (!records[2 * i] && (scores[i] as number) < cutoff) gone.push(ids[i] as string);
    if (gone.length > 0) await this.#redis.zrem(shard.index, ...gone);
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
      [...byExecution].map(([id, list]) =>
        this.#redis.hookgateWriteExecution(...this.#writeArgs(id, undefined, undefined, list).args),
      ),
    );
  }

  async events(id: string, afterSeq: number): Promise<SequencedEvent[]> {
    return (await this.#events(id, afterSeq, '0')) ?? [];
  }

  /**
   * The events after `afterSeq`, marking the execution watched in the same script: from
   * then on its writes publish their events on its channel. Call it once subscribed to
   * that channel: every event is then in what this returns or published after it. An
   * execution not written yet is marked all the same (its hash made, with the store's
   * lifetime), so that its first writes publish.
   */
  async watchEvents(id: string, afterSeq: number): Promise<SequencedEvent[]> {
    return (await this.#events(id, afterSeq, '1')) ?? [];
  }

  /**
   * As watchEvents, for an execution known to be written (a gateway's own enqueue, or a
   * record it read): undefined, and nothing marked or made, when the store has no hash
   * of it: gone (discarded, dropped by the byte budget, expired). Same commands as
   * watchEvents.
   */
  watchStoredEvents(id: string, afterSeq: number): Promise<SequencedEvent[] | undefined> {
    return this.#events(id, afterSeq, 'w');
  }

  /**
   * As events, undefined when the store has no hash of the execution (a relay catching
   * up after a lost connection: one marked watched before has no hash only once gone).
   */
  storedEvents(id: string, afterSeq: number): Promise<SequencedEvent[] | undefined> {
    return this.#events(id, afterSeq, 'e');
  }

  async #events(
    id: string,
    afterSeq: number,
    mode: EventsReadMode,
  ): Promise<SequencedEvent[] | undefined> {
    // Seqs are 1, 2, 3… in position order, so the events after `afterSeq` start there.
    const keys = this.layout.of(id);
    const raw = await this.#redis.hookgateReadEvents(
      keys.execution(id),
      Math.max(0, afterSeq),
      mode,
      this.#ttlMs,
    );
    if (raw === null) return undefined;
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
        Promise.all([
          this.#redis.get(shard.bytes),
          this.#redis.zcard(shard.finished),
          this.#redis.zcard(shard.held),
        ]),
      ),
    );
    let bytes = 0;
    let entries = 0;
    for (const [b, finished, held] of shards) {
      bytes += Number(b ?? 0);
      entries += finished + held;
    }
    return { bytes, entries, evictions: { ...this.#evictions } };
  }

  /**
   * HeldRecords: holds a finished dead-lettered record (HOLD); the hold's bound is half
   * of its shard's budget, and `beyond` names held records of that shard past it.
   */
  async hold(id: string): Promise<{ held: boolean; hold: number; beyond: HeldRecord[] }> {
    const keys = this.layout.of(id);
    const [held, hold, ...beyond] = await this.#redis.hookgateHoldExecution(
      keys.execution(id),
      keys.finished,
      keys.held,
      keys.sizes,
      keys.heldBytes,
      id,
      Math.floor(this.#maxBytes / 2),
      this.indexTtlMs,
      keys.executionPrefix,
    );
    if (Number(held) !== 1) return { held: false, hold: 0, beyond: [] };
    const named: HeldRecord[] = [];
    for (let i = 0; i < beyond.length; i += 2)
      named.push({ id: String(beyond[i]), hold: Number(beyond[i + 1]) });
    return { held: true, hold: Number(hold), beyond: named };
  }

  /**
   * HeldRecords: the entry of hold `hold` is listed; drops those it named (LISTED). Those
   * past their time on the store's clock (scored below now less a lifetime) expired: off
   * the budget, as WRITE's trim takes them, not counted nor returned.
   */
  async listed(id: string, hold: number, beyond: HeldRecord[]): Promise<string[]> {
    const keys = this.layout.of(id);
    const dropped = await this.#redis.hookgateHeldListed(
      keys.execution(id),
      keys.index,
      keys.held,
      keys.sizes,
      keys.bytes,
      keys.heldBytes,
      hold,
      keys.executionPrefix,
      this.#now() - this.#ttlMs,
      ...beyond.flatMap((named) => [named.id, named.hold]),
    );
    this.#evictions.bytes += dropped.length;
    return dropped;
  }

  /**
   * HeldRecords: back in their shards' finished sets (RELEASE), with their scores,
   * unless their entries were added again since.
   */
  async release(records: ReleasedRecord[]): Promise<void> {
    await Promise.all(
      this.#byShard(records).map(([keys, some]) =>
        this.#redis.hookgateReleaseExecutions(
          keys.finished,
          keys.held,
          keys.sizes,
          keys.heldBytes,
          this.indexTtlMs,
          keys.executionPrefix,
          ...some.flatMap((r) => [r.id, r.hold ?? '']),
        ),
      ),
    );
  }

  async heldBytes(): Promise<number> {
    const sums = await Promise.all(this.layout.shards.map((s) => this.#redis.get(s.heldBytes)));
    return sums.reduce((total, b) => total + Number(b ?? 0), 0);
  }

  /** Records grouped by their shards (one script per shard: its keys share one slot). */
  #byShard(records: ReleasedRecord[]): [ShardKeys, ReleasedRecord[]][] {
    const groups = new Map<ShardKeys, ReleasedRecord[]>();
    for (const record of records) {
      const keys = this.layout.of(record.id);
      const group = groups.get(keys);
      if (group) group.push(record);
      else groups.set(keys, [record]);
    }
    return [...groups];
  }

  /**
   * Finished, and past its time on the store's clock (as Redis expires it, #finishedLeft):
   * its lifetime from creation, and the grace after it finished; a dead-lettered one past
   * deadLetteredUntil. A queued or running one never expires: its job still has to run it.
   */
  #expired(execution: Execution): boolean {
    if (!isFinished(execution)) return false;
    const now = this.#now();
    if (Date.parse(execution.createdAt) >= now - this.#ttlMs) return false;
    const dead = execution.deadLetteredAt;
    if (dead !== undefined && deadLetteredUntil(dead, this.#ttlMs) >= now) return false;
    if (!execution.finishedAt) return true;
    return Date.parse(execution.finishedAt) < now - FINISHED_GRACE_MS;
  }
}

/**
 * Whether an index entry was on the pages before `after`: newer, or of its time with an
 * id not below its key (members of one score come in reverse order); a cursor of a time
 * alone passes all of that millisecond.
 */
function shownBefore(after: Cursor, ms: number, id: string): boolean {
  if (ms !== after.ms) return ms > after.ms;
  return after.key === undefined || id >= after.key;
}

/**
 * The `next` of a page its scan bound cut short: before a time (resumeBefore); else after
 * the last item shown; none when every entry looked at was of one millisecond and none
 * was shown (no position past them names none of them).
 */
function pastBound(
  shown: { ms: number; id: string } | undefined,
  first: number | undefined,
  last: number | undefined,
): string | undefined {
  if (first === undefined || last === undefined) return undefined;
  const before = resumeBefore(last, shown?.ms ?? first);
  if (before !== undefined) return encodeCursor({ ms: before });
  return shown ? encodeCursor({ ms: shown.ms, key: shown.id }) : undefined;
}

/**
 * Where a listing goes on when its page's scan bound was reached: before a time later than
 * `last` (the creation time of the last entry looked at), so that nothing not looked at
 * is passed over, and not later than `bound` (the last item shown, else the first entry
 * looked at), so that no item shown comes again and the next page starts further back.
 * A whole second when one fits (the cursor then tells no execution's time), else the
 * millisecond after `last`; undefined when neither fits (all in one millisecond).
 */
export function resumeBefore(last: number, bound: number): number | undefined {
  for (const step of [1000, 1]) {
    const before = (Math.floor(last / step) + 1) * step;
    if (before <= bound) return before;
  }
  return undefined;
}

/** A tombstone as DISCARD writes it: {"status":"succeeded","at":<ms>}. */
export function parseTombstone(text: string): Tombstone {
  const { at } = JSON.parse(text) as { at: number };
  return { status: 'succeeded', finishedAt: new Date(at).toISOString() };
}
