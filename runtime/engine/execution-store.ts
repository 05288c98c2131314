// The executions store: finished and running executions with their per-run logs and
// event streams, for Flow Management (list, per-run log) and for late SSE subscribers.
import type { WorkflowRegistration } from '../../api/records/records.ts';
import { noEvictions, type BoundedStore, type BoundedStoreStats } from '../bounded.ts';
import { HttpProblem } from '../errors.ts';
import type { HeldRecord, HeldRecords, ReleasedRecord } from './dead-letters.ts';
import { ExpiringEntries } from './expiring-entries.ts';
import type {
  Execution,
  ExecutionFilter,
  ExecutionPage,
  SequencedEvent,
  StartRequest,
  Tombstone,
} from './ports.ts';
import {
  boundEvent,
  boundExecution,
  carriesBody,
  DEFAULT_STORED_BODY_BYTES,
  eventBytes,
  recordBytes,
} from './record-bounds.ts';

export interface ExecutionStore {
  /**
   * Insert or replace an execution. The store may keep the object it is given: the
   * caller hands it over and changes it afterwards only to save it again. Readers
   * (get, list) always receive copies. Bodies above the store's stored-body limit are
   * kept cut (record-bounds.ts).
   */
  save(execution: Execution): Promise<void>;
  get(id: string): Promise<Execution | undefined>;
  /** Newest first (by createdAt); `since` inclusive, `until` exclusive; limit default 50. */
  list(filter: ExecutionFilter): Promise<Execution[]>;
  /** `list` with a cursor and a byte budget: one page, and the cursor of the next. */
  page(filter: ExecutionFilter): Promise<ExecutionPage>;
  /** Append events (in seq order) to an execution's stream. Events are never changed once emitted. */
  appendEvents(events: SequencedEvent[]): Promise<void>;
  /**
   * The record and events of a run, written together or not at all (a store shared
   * between processes): a run that dies in between must not leave a terminal event
   * beside a record still running, or the run taking the job again would end the
   * execution a second time. A worker also writes its running record this way, with
   * the run's first events (one step instead of two). `acknowledge`: the queue entry of
   * the run's job (a store that keeps the queue, on the execution's shard), done in the
   * same step, so a finished run is never left unacknowledged by a worker dying right
   * after. Optional: a store without it gets `save` then `appendEvents`, and the caller
   * acknowledges.
   */
  saveWithEvents?(
    execution: Execution,
    events: SequencedEvent[],
    acknowledge?: string,
  ): Promise<void>;
  /**
   * Instead of the finishing write of a succeeded execution whose workflow discards the
   * records of succeeded executions (Workflow `spec.executionRecords.succeeded: Discard`,
   * ADR 0041): removes its record, its events, its index entry and (`options.finished`:
   * a finished record of it was saved before, whose callback delivery has now ended) its
   * share of the byte budget, in one step with the acknowledgement of
   * `options.acknowledge` (as saveWithEvents). Reads by id and listings no longer find it.
   * `events`: the run's events not written yet, the terminal one among them, as
   * saveWithEvents takes them. Whoever is watching the execution still gets its end: the
   * events stay readable (`events`) for the store's handover time, without the record,
   * when the execution is watched (memory: `options.watched`, StartRequest.watched, a
   * gateway's waiting modes; Redis: the mark on its hash, whose new events are then
   * published as a write publishes them). One nobody watches leaves nothing, but one
   * that came with an Idempotency-Key (`options.tombstoneMs`: the key's window,
   * StartRequest.idempotencyWindowMs), watched or not, leaves a tombstone for that long
   * (`discarded`), so that a retry resuming its id does not run it again.
   */
  discard(execution: Execution, events: SequencedEvent[], options?: DiscardOptions): Promise<void>;
  /**
   * The tombstone a discarded execution left (see discard), until it expires; undefined
   * for any other id. Not a record: get, list and page never show it.
   */
  discarded(id: string): Promise<Tombstone | undefined>;
  /**
   * Events of an execution with seq > afterSeq, in order. A `completed` or `respond`
   * event whose body was cut is whole for `handoverMs` after it was appended (so a
   * caller that starts waiting just after the end still gets the result), cut after.
   */
  events(id: string, afterSeq: number): Promise<SequencedEvent[]>;
}

/** ExecutionStore.discard's options. */
export interface DiscardOptions {
  /** The queue entry of the run's job, acknowledged in the same step. */
  acknowledge?: string;
  /** A finished record of it was saved before (its callback delivered): its bytes go too. */
  finished?: boolean;
  /** A caller waits for its end (memory store; Redis reads the mark on the hash). */
  watched?: boolean;
  /** It came with an Idempotency-Key kept this long (ms): leave a tombstone that long. */
  tombstoneMs?: number;
}

/** Declared with the engine's port (ExecutionGone carries it to subscribers). */
export type { Tombstone };

/**
 * The refusal of a start whose id has a tombstone (ExecutionEngine.start): the
 * execution ran and succeeded, and its record was discarded; nothing runs again.
 */
export function executionDiscarded(id: string, tombstone: Tombstone): HttpProblem {
  return new HttpProblem(
    'HG_ERR_EXECUTION_DISCARDED',
    `Execution ${id} succeeded at ${tombstone.finishedAt}; its workflow discards the records of succeeded executions, so its result is gone`,
    { extensions: { executionId: id, finishedAt: tombstone.finishedAt } },
  );
}

/** Whether an execution has ended (succeeded or failed). */
export const isFinished = (e: Execution): boolean =>
  e.status === 'succeeded' || e.status === 'failed';

/** Whether the workflow discards the records of its succeeded executions (ADR 0041). */
export function discardsSucceeded(workflow: Pick<WorkflowRegistration, 'spec'>): boolean {
  return workflow.spec.executionRecords?.succeeded === 'Discard';
}

/** What a start request's run does with the record of a success (ADR 0041). */
type DiscardRequest = Pick<StartRequest, 'workflow' | 'keepRecord' | 'respondAwaited'>;

/**
 * What a job tells the worker that runs it about a success (ExecutionJob.discardIfSucceeded,
 * ADR 0041 amended 2026-11-28 (day)): the view of the workflow it was queued under (or, a
 * retry's job, the views so far). `true`: discard it; `'responded'`: discard it once a
 * respond node ran (Wait for Response Node); absent: keep it.
 */
export type QueuedDiscard = true | 'responded';

/** The job's `discardIfSucceeded` of a start request (queued-engine.ts, retry-queue-redis.ts). */
export function queuedDiscard(request: DiscardRequest): QueuedDiscard | undefined {
  if (request.keepRecord || !discardsSucceeded(request.workflow)) return undefined;
  return request.respondAwaited ? 'responded' : true;
}

/**
 * Whether the run of `request`, succeeded, discards its record: its workflow says Discard,
 * the view it was queued under did too (a worker's run: `keepRecord`), and a caller who
 * waited for a respond node got one (`respondAwaited`). Callback mode: once delivered.
 */
export function discardsSuccess(
  request: DiscardRequest,
  execution: Pick<Execution, 'response'>,
): boolean {
  return (
    request.keepRecord !== true &&
    discardsSucceeded(request.workflow) &&
    (request.respondAwaited !== true || execution.response !== undefined)
  );
}

export const DEFAULT_LIST_LIMIT = 50;
export const MAX_LIST_LIMIT = 1000;
/** Default byte budget of one page of a listing (4 MiB). */
export const DEFAULT_PAGE_BYTES = 4 * 1024 * 1024;
/** Default lifetime of an execution record and its events (24 h). */
export const DEFAULT_EXECUTION_TTL_MS = 24 * 3_600_000;
/**
 * How long, at least, an execution stays readable once finished, past its lifetime (Redis:
 * one that waited in the queue past its lifetime is not gone the moment it ends); and how
 * long a dead-lettered one outlives its dead-letter entry (deadLetteredUntil).
 */
export const FINISHED_GRACE_MS = 60_000;

/**
 * Until when (ms) a dead-lettered execution is kept: a lifetime and a minute after it was
 * dead-lettered, whenever it was created. Its dead-letter entry lives a lifetime from then
 * (dead-letters.ts deadLetterTime), so while an entry is listed its record and events can
 * be read and retried (ADR 0039). NaN when `deadLetteredAt` is no time.
 */
export function deadLetteredUntil(deadLetteredAt: string, ttlMs: number): number {
  return Date.parse(deadLetteredAt) + ttlMs + FINISHED_GRACE_MS;
}

/** Default time a cut event stays whole after it was appended (30 s). */
export const DEFAULT_HANDOVER_MS = 30_000;
/** Default byte budget of the memory store (128 MiB). */
export const DEFAULT_MEMORY_STORE_BYTES = 128 * 1024 * 1024;

/**
 * A page position: the creation time and tie-breaker of the last item shown; or, without
 * a key, a time alone: the next page lists what was created before it (Redis, a page cut
 * short by its scan bound: it names none of the executions it passed over).
 */
export interface Cursor {
  ms: number;
  key?: string;
}

export function encodeCursor(cursor: Cursor): string {
  const text = cursor.key === undefined ? `${cursor.ms}` : `${cursor.ms}.${cursor.key}`;
  return Buffer.from(text).toString('base64url');
}

/** Undefined when `text` is not a cursor of ours. */
export function decodeCursor(text: string): Cursor | undefined {
  if (!/^[A-Za-z0-9_-]{1,700}$/.test(text)) return undefined;
  const raw = Buffer.from(text, 'base64url').toString('utf8');
  const match = /^(\d{1,16})(?:\.([\x21-\x7e]{1,256}))?$/.exec(raw);
  if (!match) return undefined;
  const ms = Number(match[1]);
  return match[2] === undefined ? { ms } : { ms, key: match[2] };
}

/** limit from a filter: default 50, 1 to 1000. */
export function listLimit(filter: ExecutionFilter): number {
  return Math.min(Math.max(1, filter.limit ?? DEFAULT_LIST_LIMIT), MAX_LIST_LIMIT);
}

export interface MemoryExecutionStoreOptions {
  /** Keep at most this many executions; the oldest are dropped first. Default 10 000. */
  maxExecutions?: number;
  /**
   * Keep records and events of at most about this many bytes (their size as JSON);
   * the oldest are dropped first. Default 128 MiB.
   */
  maxBytes?: number;
  /** Bodies, outputs and response bodies larger than this are kept cut. Default 64 KiB. */
  maxBodyBytes?: number;
  /**
   * Drop executions this long after they were created (a dead-lettered one: a lifetime
   * and a minute after it was dead-lettered, deadLetteredUntil). Default 24 h.
   */
  ttlMs?: number;
  /** A cut event stays whole this long after it was appended. Default 30 s. */
  handoverMs?: number;
  /**
   * Tombstones (discard's `tombstoneMs`) kept at most; the oldest go first. Default
   * 100 000, the memory idempotency store's keys: a tombstone is read only by a retry
   * under a key, so it need not outnumber them, and fewer let a late retry run again.
   */
  maxTombstones?: number;
  /** Clock (tests). */
  now?: () => number;
}

interface Entry {
  id: string;
  /** Insertion number: orders executions created in the same millisecond. */
  seq: number;
  execution: Execution;
  createdMs: number;
  events: SequencedEvent[];
  /** Bytes of the record, and of the events. */
  recordBytes: number;
  eventBytes: number;
  /**
   * Dead-lettered: kept until then (ms), not `ttlMs` from its creation, and expired from
   * #retained (or #held) instead of #order; 0 for every other entry.
   */
  retainedUntil: number;
  /** Held for its dead-letter entry (HeldRecords): in #held, never dropped for room. */
  held: boolean;
  /** The number of its last hold, negative while that hold's add lists its entry (HeldRecords). */
  hold: number;
}

/** The events of a discarded execution, readable until `until` (ms). */
interface Discarded {
  id: string;
  events: SequencedEvent[];
  until: number;
  /** Bytes of its events as kept (summed by #discarded). */
  bytes: number;
  /** Its events' bodies are cut to the stored-body limit (done beyond the byte bound). */
  cut: boolean;
}

/** Discarded executions whose events the memory store keeps for the handover time, at most. */
const MAX_DISCARDED_HANDOVERS = 1000;

/** Tombstones the memory store keeps at most, by default (MemoryExecutionStoreOptions). */
export const DEFAULT_MAX_TOMBSTONES = 100_000;

/** A tombstone in the memory store (its bytes: the id and this). */
interface Grave {
  finishedAt: string;
  until: number;
  bytes: number;
}
const GRAVE_BYTES = 64;

/** An event kept whole for a while; `cut` replaces it once the while is over. */
interface Handover {
  entry: Entry;
  index: number;
  cut: SequencedEvent;
  extraBytes: number;
  until: number;
}

/**
 * In-memory adapter. Bounded: at most `maxExecutions` entries and `maxBytes` bytes
 * (insertion order, oldest evicted first), each entry living `ttlMs` from its creation,
 * whether it has finished or not (this process's engine holds what it runs). A
 * dead-lettered one lives until deadLetteredUntil instead: it moves to a queue of its own
 * (#retained, in the order they expire), so it holds up no sweep of the others; over a bound,
 * whichever of the two queues' first entries expires first goes. While its dead-letter
 * entry is listed it is held (HeldRecords): in #held, which no bound drops from, counted in
 * the bounds (ordinary entries make the room), and bounded itself to half of each, beyond
 * which the dead-letter list drops the oldest entries with their records. Expired entries
 * are swept on writes and hidden on reads; listings show what reads by id show.
 */
export class MemoryExecutionStore implements ExecutionStore, BoundedStore, HeldRecords {
  readonly storeName = 'executions';
  readonly #entries = new Map<string, Entry>();
  /**
   * Entries in insertion order, for eviction: a queue with a moving head, because a Map
   * iterated from its start walks over every entry deleted since its last rehash (the
   * evicted ones are all at the front), which made each save of a full store cost ~8 µs.
   * Entries already dropped on read stay here until the head passes them.
   */
  #order: (Entry | undefined)[] = [];
  #head = 0;
  /**
   * Dead-lettered entries (retainedUntil) not held, in the order they expire (those
   * released by the dead-letter list are put in their place).
   */
  #retained: (Entry | undefined)[] = [];
  #retainedHead = 0;
  /** Entries held for their dead-letter entries, in the order they expire. */
  #held: (Entry | undefined)[] = [];
  #heldHead = 0;
  /** Bytes and number of the held entries (within #bytes and the entries). */
  #heldBytes = 0;
  #heldCount = 0;
  #seq = 0;
  #bytes = 0;
  readonly #evictions = noEvictions();
  /**
   * Discarded executions' events (ADR 0041), readable for the handover time by a caller
   * that starts listening just after the end; in the order they were discarded, at most
   * MAX_DISCARDED_HANDOVERS (the oldest go first). Outside the byte budget: a listener
   * comes within microseconds in this process. Bounded by bytes too (#boundDiscarded):
   * the budget's size at most, beyond which the oldest are cut, then go.
   */
  readonly #discarded = new ExpiringEntries<Discarded>();
  /**
   * Tombstones (ExecutionStore.discarded), in the order they were left: each until its
   * key's window is over, in the byte budget, and at most `maxTombstones` of them and half
   * the budget's bytes (the oldest go first, counted as evictions): the budget's bound
   * drops records only, so tombstones over it would push every record out.
   */
  readonly #graves = new ExpiringEntries<Grave>();
  /** Whole events waiting to be cut, in the order they came. */
  #handovers: (Handover | undefined)[] = [];
  #handoverHead = 0;
  readonly #max: number;
  readonly #maxTombstones: number;
  readonly #maxBytes: number;
  readonly #maxBodyBytes: number;
  readonly #ttlMs: number;
  readonly #handoverMs: number;
  readonly #now: () => number;

  constructor(options: MemoryExecutionStoreOptions = {}) {
    this.#max = options.maxExecutions ?? 10_000;
    this.#maxTombstones = options.maxTombstones ?? DEFAULT_MAX_TOMBSTONES;
    this.#maxBytes = options.maxBytes ?? DEFAULT_MEMORY_STORE_BYTES;
    this.#maxBodyBytes = options.maxBodyBytes ?? DEFAULT_STORED_BODY_BYTES;
    this.#ttlMs = options.ttlMs ?? DEFAULT_EXECUTION_TTL_MS;
    this.#handoverMs = options.handoverMs ?? DEFAULT_HANDOVER_MS;
    this.#now = options.now ?? Date.now;
  }

  save(execution: Execution): Promise<void> {
    const existing = this.#entries.get(execution.id);
    // The very object held, not finished (an engine marking its run running): it holds
    // the change already, and had nothing to cut; its size is counted again when it
    // finishes.
    if (existing?.execution === execution && !isFinished(execution)) return Promise.resolve();
    // Kept as given when every part fits (see the port): copying here cost more than
    // the rest of a request. A record with a large part is kept as a cut copy.
    const kept = boundExecution(execution, this.#maxBodyBytes);
    const bytes = recordBytes(kept);
    let entry = existing;
    if (entry) {
      entry.execution = kept;
      this.#grow(entry, bytes - entry.recordBytes);
      entry.recordBytes = bytes;
    } else {
      entry = {
        id: execution.id,
        seq: ++this.#seq,
        execution: kept,
        createdMs: Date.parse(execution.createdAt) || this.#now(),
        events: [],
        recordBytes: bytes,
        eventBytes: 0,
        retainedUntil: 0,
        held: false,
        hold: 0,
      };
      this.#entries.set(execution.id, entry);
      this.#order.push(entry);
      this.#bytes += bytes;
    }
    if (kept.deadLetteredAt !== undefined) this.#retain(entry, kept.deadLetteredAt);
    this.#sweep();
    return Promise.resolve();
  }

  /**
   * A dead-lettered entry lives until deadLetteredUntil (its time counted at the latest
   * from now), at least its lifetime from creation. One retained already keeps its time.
   */
  #retain(entry: Entry, deadLetteredAt: string): void {
    if (entry.retainedUntil !== 0) return;
    const now = this.#now();
    const latest = now + this.#ttlMs + FINISHED_GRACE_MS;
    const until = Math.min(deadLetteredUntil(deadLetteredAt, this.#ttlMs), latest);
    entry.retainedUntil = Math.max(
      Number.isNaN(until) ? latest : until,
      entry.createdMs + this.#ttlMs,
    );
    this.#retained.push(entry);
  }

  get(id: string): Promise<Execution | undefined> {
    this.#sweep();
    const entry = this.#live(id);
    return Promise.resolve(entry ? structuredClone(entry.execution) : undefined);
  }

  async list(filter: ExecutionFilter): Promise<Execution[]> {
    return (await this.page(filter)).items;
  }

  /**
   * The matching entries the caller may read (`triggerReadable`, asked as they come),
   * until the page is full; `next` (the last one shown) only when another follows.
   */
  async page(filter: ExecutionFilter): Promise<ExecutionPage> {
    const limit = listLimit(filter);
    const maxBytes = filter.maxBytes ?? Infinity;
    const readable = filter.triggerReadable;
    const items: Execution[] = [];
    let bytes = 0;
    let last: Entry | undefined;
    for (const entry of this.#matching(filter)) {
      if (readable && !(await readable(entry.execution.triggerKey))) continue;
      // Dropped, or replaced by a save, while the answer was awaited.
      if (readable && this.#entries.get(entry.id) !== entry) continue;
      if (last && (items.length === limit || bytes + entry.recordBytes > maxBytes)) {
        return { items, next: encodeCursor({ ms: last.createdMs, key: String(last.seq) }) };
      }
      bytes += entry.recordBytes;
      items.push(structuredClone(entry.execution));
      last = entry;
    }
    return { items };
  }

  /** The live entries the filter (and cursor) select, newest first. */
  #matching(filter: ExecutionFilter): Entry[] {
    const now = this.#now();
    const keep = entryFilter(filter);
    const matches: Entry[] = [];
    // Newest insertions first; the sort below then only fixes what was saved out of
    // creation order (and the retained ones), later insertions first among equal times.
    for (let i = this.#order.length - 1; i >= this.#head; i--) {
      const entry = this.#order[i] as Entry;
      if (entry.retainedUntil !== 0) continue; // listed from #retained
      if (this.#entries.get(entry.id) === entry && !this.#expired(entry, now) && keep(entry))
        matches.push(entry);
    }
    for (let i = this.#retainedHead; i < this.#retained.length; i++) {
      const entry = this.#retained[i];
      if (!entry || entry.held || this.#entries.get(entry.id) !== entry) continue;
      if (!this.#expired(entry, now) && keep(entry)) matches.push(entry);
    }
    for (let i = this.#heldHead; i < this.#held.length; i++) {
      const entry = this.#held[i];
      if (!entry || !this.#isHeld(entry)) continue;
      if (!this.#expired(entry, now) && keep(entry)) matches.push(entry);
    }
    return matches.sort((a, b) => b.createdMs - a.createdMs || b.seq - a.seq);
  }

  /** Past its lifetime from creation, or (dead-lettered) past the time it is kept until. */
  #expired(entry: Entry, now: number): boolean {
    return entry.retainedUntil === 0
      ? entry.createdMs < now - this.#ttlMs
      : entry.retainedUntil < now;
  }

  appendEvents(events: SequencedEvent[]): Promise<void> {
    for (const event of events) {
      const entry = this.#entries.get(event.executionId);
      if (!entry) continue;
      const last = entry.events.at(-1);
      if (last && last.seq >= event.seq) continue;
      const cut = carriesBody(event) ? boundEvent(event, this.#maxBodyBytes) : event;
      const bytes = eventBytes(cut);
      let extraBytes = 0;
      if (cut !== event) {
        // Kept whole for a while (see the port); its whole size counts meanwhile.
        extraBytes = wholeBytes(cut);
        this.#handovers.push({
          entry,
          index: entry.events.length,
          cut,
          extraBytes,
          until: this.#now() + this.#handoverMs,
        });
      }
      entry.events.push(event);
      entry.eventBytes += bytes + extraBytes;
      this.#grow(entry, bytes + extraBytes);
    }
    this.#sweep();
    return Promise.resolve();
  }

  /**
   * ExecutionStore.discard: the entry goes (not counted as an eviction); a watched one's
   * events, with the ones given, stay readable for the handover time (see #discarded).
   */
  discard(execution: Execution, events: SequencedEvent[], options?: DiscardOptions): Promise<void> {
    const entry = this.#entries.get(execution.id);
    const kept = entry ? entry.events : [];
    if (entry) this.#remove(entry);
    if (options?.watched) this.#keepDiscarded(execution.id, kept, events);
    if (options?.tombstoneMs !== undefined) this.#bury(execution, options.tombstoneMs);
    this.#sweep();
    return Promise.resolve();
  }

  discarded(id: string): Promise<Tombstone | undefined> {
    const grave = this.#graves.get(id);
    if (!grave || grave.until <= this.#now()) return Promise.resolve(undefined);
    return Promise.resolve({ status: 'succeeded', finishedAt: grave.finishedAt });
  }

  /** Leaves the tombstone of a discarded execution for `ms` (see #graves). */
  #bury(execution: Execution, ms: number): void {
    const { id } = execution;
    const now = this.#now();
    this.#forgetGrave(id);
    const bytes = GRAVE_BYTES + id.length;
    const finishedAt = execution.finishedAt ?? new Date(now).toISOString();
    this.#graves.set(id, { finishedAt, until: now + ms, bytes });
    this.#bytes += bytes;
    for (const [oldest] of this.#graves.entries()) {
      if (this.#graves.size > this.#maxTombstones) this.#evictions.count++;
      else if (this.#graves.bytes * 2 > this.#maxBytes && this.#graves.size > 1)
        this.#evictions.bytes++;
      else break;
      this.#forgetGrave(oldest);
    }
  }

  #forgetGrave(id: string): void {
    const grave = this.#graves.delete(id);
    if (grave) this.#bytes -= grave.bytes;
  }

  /** Keeps a watched discarded execution's events, `kept` then the later of `events` (#discarded). */
  #keepDiscarded(id: string, kept: SequencedEvent[], events: SequencedEvent[]): void {
    let last = kept.at(-1)?.seq ?? 0;
    for (const event of events) {
      if (event.seq <= last) continue;
      kept.push(event);
      last = event.seq;
    }
    const discarded = this.#discarded;
    let bytes = 0;
    for (const event of kept) bytes += eventBytes(event);
    discarded.set(id, {
      id,
      events: kept,
      until: this.#now() + this.#handoverMs,
      bytes,
      cut: false,
    });
    for (const [oldest] of discarded.entries()) {
      if (discarded.size <= MAX_DISCARDED_HANDOVERS) break;
      discarded.delete(oldest);
    }
    this.#boundDiscarded(id);
  }

  /**
   * Keeps the discarded executions' events within the budget's size: beyond it the
   * oldest have their bodies cut (as whole events kept for a handover are cut when the
   * store is over its budget), then the oldest go; `newest` (what a caller about to
   * listen needs) never goes, and is cut only when it alone is over.
   */
  #boundDiscarded(newest: string): void {
    const over = () => this.#discarded.bytes > this.#maxBytes;
    if (!over()) return;
    for (const [id, gone] of this.#discarded.entries()) {
      if (!over()) return;
      if (id !== newest) this.#cutDiscarded(gone);
    }
    for (const [id] of this.#discarded.entries()) {
      if (!over()) return;
      if (id !== newest) this.#discarded.delete(id);
    }
    const last = this.#discarded.get(newest);
    if (last && over()) this.#cutDiscarded(last);
  }

  #cutDiscarded(gone: Discarded): void {
    if (gone.cut) return;
    gone.cut = true;
    gone.events = gone.events.map((e) => (carriesBody(e) ? boundEvent(e, this.#maxBodyBytes) : e));
    let bytes = 0;
    for (const event of gone.events) bytes += eventBytes(event);
    this.#discarded.resize(gone, bytes);
  }

  events(id: string, afterSeq: number): Promise<SequencedEvent[]> {
    this.#sweep();
    const events = this.#live(id)?.events ?? this.#discarded.get(id)?.events ?? [];
    return Promise.resolve(events.filter((e) => e.seq > afterSeq).map((e) => ({ ...e })));
  }

  /** Number of entries held (tests). */
  get size(): number {
    return this.#entries.size;
  }

  stats(): BoundedStoreStats {
    return { bytes: this.#bytes, entries: this.#entries.size, evictions: { ...this.#evictions } };
  }

  /** HeldRecords: holds a finished dead-lettered entry; see the class and the port. */
  hold(id: string): Promise<{ held: boolean; hold: number; beyond: HeldRecord[] }> {
    const entry = this.#live(id);
    if (!entry || entry.retainedUntil === 0 || !isFinished(entry.execution))
      return Promise.resolve({ held: false, hold: 0, beyond: [] });
    if (!entry.held) {
      clearSlot(this.#retained, this.#retainedHead, entry);
      entry.held = true;
      this.#heldBytes += entry.recordBytes + entry.eventBytes;
      this.#heldCount++;
      insertByExpiry(this.#held, this.#heldHead, entry);
    }
    const hold = Math.abs(entry.hold) + 1;
    entry.hold = -hold;
    return Promise.resolve({ held: true, hold, beyond: this.#beyondHold(entry) });
  }

  /**
   * The held entries past half of each bound, oldest first, but `keep` (the one just
   * held: however large, the newest dead letter is listed) and those being listed.
   */
  #beyondHold(keep: Entry): HeldRecord[] {
    let bytes = this.#heldBytes;
    let count = this.#heldCount;
    const beyond: HeldRecord[] = [];
    const held = this.#held;
    for (let i = this.#heldHead; i < held.length; i++) {
      if (bytes <= this.#maxBytes / 2 && count <= this.#max / 2) break;
      const entry = held[i];
      if (!entry || entry === keep || entry.hold < 0 || !this.#isHeld(entry)) continue;
      bytes -= entry.recordBytes + entry.eventBytes;
      count--;
      beyond.push({ id: entry.id, hold: entry.hold });
    }
    return beyond;
  }

  /**
   * HeldRecords: the entry of hold `hold` is listed; drops those it named, unless held
   * again. One past its time goes as expired (#live), not for room, and is not returned.
   */
  listed(id: string, hold: number, beyond: HeldRecord[]): Promise<string[]> {
    const entry = this.#entries.get(id);
    if (entry?.hold === -hold) entry.hold = hold;
    const dropped: string[] = [];
    for (const named of beyond) {
      const other = this.#live(named.id);
      if (other?.held && other.hold === named.hold) {
        this.#drop(other, 'bytes');
        dropped.push(named.id);
      }
    }
    return Promise.resolve(dropped);
  }

  /**
   * HeldRecords: ordinary dead-lettered entries again, dropped for room like the others,
   * if the entry that left was the last added: written under the entry's hold, said
   * listed or not. A later hold (an add in flight, or one that listed it again) keeps
   * it. Without a number (none written): not one being listed.
   */
  release(records: ReleasedRecord[]): Promise<void> {
    for (const { id, hold } of records) {
      const entry = this.#entries.get(id);
      if (!entry?.held) continue;
      if (hold === undefined ? entry.hold < 0 : Math.abs(entry.hold) !== hold) continue;
      clearSlot(this.#held, this.#heldHead, entry);
      this.#unhold(entry);
      insertByExpiry(this.#retained, this.#retainedHead, entry);
    }
    this.#sweep();
    return Promise.resolve();
  }

  heldBytes(): Promise<number> {
    return Promise.resolve(this.#heldBytes);
  }

  #isHeld(entry: Entry): boolean {
    return entry.held && this.#entries.get(entry.id) === entry;
  }

  #unhold(entry: Entry): void {
    entry.held = false;
    this.#heldBytes -= entry.recordBytes + entry.eventBytes;
    this.#heldCount--;
  }

  /** An entry's bytes changed by `delta`: the store's, and the hold's when it is held. */
  #grow(entry: Entry, delta: number): void {
    this.#bytes += delta;
    if (entry.held) this.#heldBytes += delta;
  }

  #live(id: string): Entry | undefined {
    const entry = this.#entries.get(id);
    if (!entry) return undefined;
    if (this.#expired(entry, this.#now())) {
      this.#drop(entry, 'expired');
      return undefined;
    }
    return entry;
  }

  #drop(entry: Entry, reason: keyof BoundedStoreStats['evictions']): void {
    this.#remove(entry);
    this.#evictions[reason]++;
  }

  /** Takes `entry` out of the store and its bounds (#drop; discard, which counts no eviction). */
  #remove(entry: Entry): void {
    if (entry.held) this.#unhold(entry);
    this.#entries.delete(entry.id);
    this.#bytes -= entry.recordBytes + entry.eventBytes;
    // A handover still queued for it must not keep its events alive.
    entry.events = [];
  }

  /**
   * Cuts the whole events whose while is over (or all of them, oldest first, while the
   * store is over its budget), then drops the oldest entries while there are too many,
   * they take too many bytes or they have expired (the retained ones: see the class).
   */
  #sweep(): void {
    const now = this.#now();
    this.#cutHandovers(now);
    // Handovers end after their last millisecond, tombstones at theirs.
    if (this.#discarded.size > 0) this.#discarded.expire((until) => until < now);
    if (this.#graves.size > 0)
      for (const grave of this.#graves.expire((until) => until <= now)) this.#bytes -= grave.bytes;
    if (this.#retainedHead < this.#retained.length) this.#sweepRetained(now, false);
    if (this.#heldHead < this.#held.length) this.#sweepHeld(now);
    const cutoff = now - this.#ttlMs;
    const order = this.#order;
    while (this.#head < order.length) {
      const entry = order[this.#head] as Entry;
      // Not the entry of its id any more: dropped on read (and maybe saved again since);
      // or one retained for its dead letter, which #retained holds.
      if (this.#entries.get(entry.id) === entry && entry.retainedUntil === 0) {
        let reason: keyof BoundedStoreStats['evictions'];
        if (entry.createdMs < cutoff) reason = 'expired';
        else if (this.#entries.size > this.#max) reason = 'count';
        else if (this.#bytes > this.#maxBytes && this.#entries.size > 1) reason = 'bytes';
        else break;
        const drop = reason === 'expired' ? entry : this.#firstToExpire(entry);
        this.#drop(drop, reason);
        if (drop !== entry) continue;
      }
      order[this.#head++] = undefined;
    }
    // Every other entry gone and still over a bound: retained ones go too.
    const passed = this.#head === order.length;
    if (this.#head > 1024 && this.#head * 2 > order.length) {
      this.#order = order.slice(this.#head);
      this.#head = 0;
    }
    if (passed && this.#retainedHead < this.#retained.length) this.#sweepRetained(now, true);
  }

  /** Cuts the whole events whose while is over (all, oldest first, while over budget). */
  #cutHandovers(now: number): void {
    const handovers = this.#handovers;
    while (this.#handoverHead < handovers.length) {
      const h = handovers[this.#handoverHead] as Handover;
      if (h.until > now && this.#bytes <= this.#maxBytes) break;
      if (this.#entries.get(h.entry.id) === h.entry && h.entry.events[h.index]) {
        h.entry.events[h.index] = h.cut;
        h.entry.eventBytes -= h.extraBytes;
        this.#grow(h.entry, -h.extraBytes);
      }
      // Passed slots are cleared at once: until the array is compacted they would keep
      // their entry and cut event (tens of KiB each) alive outside the byte budget.
      handovers[this.#handoverHead++] = undefined;
    }
    if (this.#handoverHead > 1024 && this.#handoverHead * 2 > handovers.length) {
      this.#handovers = handovers.slice(this.#handoverHead);
      this.#handoverHead = 0;
    }
  }

  /** `entry` (first of #order), or the first retained one when that expires before it. */
  #firstToExpire(entry: Entry): Entry {
    if (this.#retainedHead === this.#retained.length) return entry;
    const retained = this.#firstRetained();
    return retained && retained.retainedUntil < entry.createdMs + this.#ttlMs ? retained : entry;
  }

  /** The first retained entry still kept and not held (passing the others). */
  #firstRetained(): Entry | undefined {
    const retained = this.#retained;
    while (this.#retainedHead < retained.length) {
      const entry = retained[this.#retainedHead];
      if (entry && !entry.held && this.#entries.get(entry.id) === entry) return entry;
      retained[this.#retainedHead++] = undefined;
    }
    return undefined;
  }

  /** Drops the held entries that expired (no bound drops one: the dead-letter list does). */
  #sweepHeld(now: number): void {
    const held = this.#held;
    while (this.#heldHead < held.length) {
      const entry = held[this.#heldHead];
      if (entry && this.#isHeld(entry)) {
        if (entry.retainedUntil >= now) break;
        this.#drop(entry, 'expired');
      }
      held[this.#heldHead++] = undefined;
    }
    [this.#held, this.#heldHead] = compacted(held, this.#heldHead);
  }

  /** Drops the retained entries that expired, and (`bounded`) the first while over a bound. */
  #sweepRetained(now: number, bounded: boolean): void {
    for (let entry = this.#firstRetained(); entry; entry = this.#firstRetained()) {
      if (entry.retainedUntil < now) this.#drop(entry, 'expired');
      else if (bounded && this.#entries.size > this.#max) this.#drop(entry, 'count');
      else if (bounded && this.#bytes > this.#maxBytes && this.#entries.size > 1)
        this.#drop(entry, 'bytes');
      else break;
    }
    [this.#retained, this.#retainedHead] = compacted(this.#retained, this.#retainedHead);
  }
}

/**
 * A queue and its head with the passed slots cut off: all of them once every slot is
 * passed, or when they are most of the queue (past the first 1024).
 */
function compacted(queue: (Entry | undefined)[], head: number): [(Entry | undefined)[], number] {
  if (head === queue.length) return [[], 0];
  if (head > 1024 && head * 2 > queue.length) return [queue.slice(head), 0];
  return [queue, head];
}

/** Takes `entry` out of a queue (its slot left empty), looking from `head`. */
function clearSlot(queue: (Entry | undefined)[], head: number, entry: Entry): void {
  const at = queue.indexOf(entry, head);
  if (at >= 0) queue[at] = undefined;
}

/**
 * Puts `entry` in a queue ordered by retainedUntil, after those that expire no later
 * (most go at the end: it is looked for from there). Rare: holds and releases.
 */
function insertByExpiry(queue: (Entry | undefined)[], head: number, entry: Entry): void {
  let at = queue.length;
  while (at > head) {
    const before = queue[at - 1];
    if (before && before.retainedUntil <= entry.retainedUntil) break;
    at--;
  }
  queue.splice(at, 0, entry);
}

/** The whole size of what a cut event left out. */
function wholeBytes(event: SequencedEvent): number {
  const truncated = 'truncated' in event ? event.truncated : undefined;
  let bytes = 0;
  for (const size of Object.values(truncated ?? {})) bytes += size;
  return bytes;
}

/** Whether an entry passes a filter: its fields, its time range, after the cursor. */
function entryFilter(filter: ExecutionFilter): (entry: Entry) => boolean {
  const since = filter.since ? Date.parse(filter.since) : -Infinity;
  const until = filter.until ? Date.parse(filter.until) : Infinity;
  const after = filter.cursor ? decodeCursor(filter.cursor) : undefined;
  const afterMs = after ? after.ms : Infinity;
  // A time alone: everything created before it. A key not a number (not this store's
  // cursor) passes over the rest of its millisecond.
  const afterSeq = after ? Number(after.key ?? 0) : Infinity;
  const { workflowId, triggerKey, status } = filter;
  return (entry) => {
    const e = entry.execution;
    const ms = entry.createdMs;
    return (
      ms >= since &&
      ms < until &&
      (ms < afterMs || (ms === afterMs && entry.seq < afterSeq)) &&
      (workflowId === undefined || e.workflowId === workflowId) &&
      (triggerKey === undefined || e.triggerKey === triggerKey) &&
      (status === undefined || e.status === status)
    );
  };
}
