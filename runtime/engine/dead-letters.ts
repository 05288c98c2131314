// The dead-letter list: executions that exhausted their workflow's retry policy, kept
// until someone retries them (admin API) or they expire, a lifetime after they were
// dead-lettered (the executions store keeps their records a minute longer: ADR 0039).
// Bounded and TTL'd; a memory adapter here, the Redis one in dead-letters-redis.ts.
//
// While an entry is listed, the executions store holds its record (HeldRecords): its
// byte budget does not drop it. The list holds a record before it adds the entry, and
// releases it once the entry has left (taken by a retry that started, dropped for `maxEntries`), so
// an entry listed can always be read and retried. What is held is bounded by the
// executions store (half its budget): beyond that, the oldest entries go, each before
// its record (ADR 0039, amended 2026-11-28).
import type { BoundedStore, BoundedStoreStats } from '../bounded.ts';
import { noEvictions } from '../bounded.ts';
import type { Execution, ExecutionError } from './ports.ts';

export interface DeadLetter {
  executionId: string;
  /** `<namespace>/<name>` of the WebhookTrigger. */
  triggerKey: string;
  namespace: string;
  workflowId: string;
  /** When the execution was created (the request came in). */
  createdAt: string;
  deadLetteredAt: string;
  /** Attempts made. */
  attempts: number;
  /** The last attempt's failure. */
  error: ExecutionError;
  /** The caller's callback URL (Async Callback mode): a retry delivers there again. */
  callbackUrl?: string;
}

/** An entry taken out of the list (DeadLetterStore.take), for `release` or to add back. */
export interface TakenDeadLetter {
  entry: DeadLetter;
  /**
   * The number of the hold of its record it was last written under (HeldRecords), so
   * that `release` can tell whether an add of the entry since holds the record; none
   * when written without one (no records, or by a process from before the numbers).
   */
  hold?: number;
}

export interface DeadLetterFilter {
  triggerKey?: string;
  namespace?: string;
  workflowId?: string;
  /** Default 50, at most 1000. */
  limit?: number;
  /**
   * Only entries of the namespaces this says the caller may read (the admin API's
   * access), applied before `limit` counts them, so a page is full while more of them
   * exist. Absent: every namespace.
   */
  namespaceReadable?: (namespace: string) => boolean | Promise<boolean>;
}

export interface DeadLetterStore {
  /**
   * Adds an entry, or replaces the one of the same execution (idempotent). Resolves
   * false when it was not added: its record is gone from the executions store (a list
   * wired to it, `records`), so the entry could be neither read nor retried. An entry
   * added with its earlier time (a retry that could not start puts its entry back) to a
   * full list may be the oldest and go at once for `maxEntries`: true, since that drop
   * is said and counted as every other (`onDropped`, evictions `count`), not again by
   * the caller.
   */
  add(entry: DeadLetter): Promise<boolean>;
  get(executionId: string): Promise<DeadLetter | undefined>;
  /** Newest first. */
  list(filter: DeadLetterFilter): Promise<DeadLetter[]>;
  /**
   * Removes the entry and returns it, atomically: of two concurrent calls for one
   * execution only one gets it (a retry claims its entry this way). Its record stays
   * held: a retry that cannot start adds the entry back (`taken.entry`), and its record
   * must still be there however full the store got meanwhile; one that started calls
   * `release`.
   */
  take(executionId: string): Promise<TakenDeadLetter | undefined>;
  /**
   * The entry taken has left for good (its retry started): its record is an ordinary
   * finished one again (HeldRecords.release), unless the entry was added again since. A
   * process that dies before leaves it held until it expires or the hold's bound drops it.
   */
  release(taken: TakenDeadLetter): Promise<void>;
  /** Entries held (the dead-letter gauge). */
  count(): Promise<number>;
}

/** A held record as the hold's bound names it: its id, and the number of its hold then. */
export interface HeldRecord {
  id: string;
  hold: number;
}

/**
 * A held record whose entry has left the list (taken by a retry that started, dropped
 * for `maxEntries`): its id, and the number of the hold its entry was last written under
 * (none: written without one, by a process from before the numbers).
 */
export interface ReleasedRecord {
  id: string;
  hold?: number;
}

/**
 * What the dead-letter list asks of the executions store: to hold the records of its
 * entries out of reach of the byte budget (and the entry cap, in memory), within a
 * bound of their own. Both executions stores implement it.
 *
 * Each hold is numbered, and a record is being listed from its hold until `listed`: the
 * bound never names one being listed, and drops one only if it was not held again since
 * it was named. Two adds (or a retry putting its entry back) run at once on several
 * workers, or in one between two awaits: the entries one add takes out of the list
 * could otherwise include the entry another add is about to write, whose record would
 * then be dropped under a listed entry (ADR 0039, amended 2026-11-28, later).
 */
export interface HeldRecords {
  /**
   * Holds the record of dead-lettered execution `id` (idempotent as to what is held) for
   * an entry about to be added. `held` false: there is no such record (gone, not
   * finished, not dead-lettered). `hold`: this hold's number, for `listed`. `beyond`:
   * held records past the hold's bound, oldest first (never `id`, nor one being listed):
   * the caller takes their entries out of the list, then calls `listed`.
   */
  hold(id: string): Promise<{ held: boolean; hold: number; beyond: HeldRecord[] }>;
  /**
   * The entry of hold `hold` of `id` is in the list: the bound may name its record from
   * now on (unless it was held again since). Drops the records `beyond` named by that
   * hold, whose entries are out of the list, except those held again since (an add in
   * flight lists them again). Resolves the ids dropped.
   */
  listed(id: string, hold: number, beyond: HeldRecord[]): Promise<string[]>;
  /**
   * The entries of these records have left the list: each becomes an ordinary finished
   * record again, kept until its expiry unless the budget needs the room, if the entry
   * that left was the last one added: its number is the record's last hold, whether that
   * add has said `listed` yet or not. One held again since (an add in flight, or one
   * that has listed the entry again) stays held. Without a number (an entry written by a
   * process from before the numbers): released unless being listed.
   */
  release(records: ReleasedRecord[]): Promise<void>;
  /** Bytes the held records take (of the executions store's budget). */
  heldBytes(): Promise<number>;
}

/** Whether an executions store can hold the records of dead letters (both adapters can). */
export function holdsRecords(store: object): store is HeldRecords {
  const s = store as Partial<HeldRecords>;
  return typeof s.hold === 'function' && typeof s.listed === 'function';
}

/** Why entries left the list other than by a retry: `count` maxEntries, `bytes` the hold's bound. */
export type DeadLetterDropReason = 'count' | 'bytes';

/** What an adapter's write of an entry took out of the list beside the expired entries. */
export interface EntriesTakenOut {
  /** Over `maxEntries`, oldest first, with the numbers they were last written under. */
  overCount: ReleasedRecord[];
  /**
   * Named beyond the hold's bound and listed until this write (not expired: those count
   * as expired). Not those it did not find: a record can be held without an entry (its
   * retry started, and its process died before the release), and dropping that record
   * loses no dead letter.
   */
  beyond: string[];
}

export interface DeadLetterStoreOptions {
  /** Entries at most; the oldest go first. Default 10 000. */
  maxEntries?: number;
  /**
   * An entry is dropped this long after its execution was dead-lettered (deadLetterTime),
   * however often it is added again. Default 24 h. Give it the executions store's
   * lifetime (HOOKGATE_EXECUTION_TTL_MS): the store keeps a dead-lettered record a
   * lifetime and a minute from then, so an entry listed can be read and retried.
   */
  ttlMs?: number;
  /**
   * The executions store whose records the entries name: it holds each entry's record
   * while the entry is listed. Without it (tests of the list alone), nothing is held.
   */
  records?: HeldRecords;
  /** Told of entries dropped for room (a warning: dead letters were lost). */
  onDropped?: (ids: string[], reason: DeadLetterDropReason) => void;
  /** Clock (tests). */
  now?: () => number;
}

export const DEAD_LETTER_DEFAULTS = { maxEntries: 10_000, ttlMs: 24 * 3_600_000 } as const;
export const MAX_DEAD_LETTER_LIST = 1000;

/** The entry of an execution that has just been dead-lettered. */
export function deadLetterOf(execution: Execution, callbackUrl?: string): DeadLetter {
  const slash = execution.triggerKey.indexOf('/');
  const entry: DeadLetter = {
    executionId: execution.id,
    triggerKey: execution.triggerKey,
    namespace: slash < 0 ? '' : execution.triggerKey.slice(0, slash),
    workflowId: execution.workflowId,
    createdAt: execution.createdAt,
    deadLetteredAt: execution.deadLetteredAt ?? execution.finishedAt ?? new Date().toISOString(),
    attempts: execution.attempt ?? 1,
    error: execution.error ?? { message: 'failed' },
  };
  if (callbackUrl) entry.callbackUrl = callbackUrl;
  return entry;
}

/**
 * Where an entry's lifetime starts: when its execution was dead-lettered, at the latest
 * `nowMs` (a clock ahead, or no time at all). Not when it was added: adding it again
 * (a worker taking over a dead worker's job, a retry that could not start putting its
 * entry back) must not let it outlive the record it names (ADR 0039).
 */
export function deadLetterTime(entry: DeadLetter, nowMs: number): number {
  const at = Date.parse(entry.deadLetteredAt);
  return Number.isNaN(at) ? nowMs : Math.min(at, nowMs);
}

export function matchesDeadLetter(entry: DeadLetter, filter: DeadLetterFilter): boolean {
  if (filter.triggerKey !== undefined && entry.triggerKey !== filter.triggerKey) return false;
  if (filter.namespace !== undefined && entry.namespace !== filter.namespace) return false;
  if (filter.workflowId !== undefined && entry.workflowId !== filter.workflowId) return false;
  return true;
}

export function listLimit(filter: DeadLetterFilter): number {
  return Math.min(Math.max(1, filter.limit ?? 50), MAX_DEAD_LETTER_LIST);
}

/**
 * What both adapters share beside their entries: the executions store holding their
 * records (none: nothing is held), the steps of an add around the adapter's own write,
 * the release of a retried entry's record, and what they dropped for room.
 */
export class DeadLetterHolds {
  /** Entries dropped other than by a retry (the list's evictions). */
  readonly evictions = noEvictions();
  readonly #records: HeldRecords | undefined;
  readonly #listener: DeadLetterStoreOptions['onDropped'];

  constructor(options: Pick<DeadLetterStoreOptions, 'records' | 'onDropped'>) {
    this.#records = options.records;
    this.#listener = options.onDropped;
  }

  /**
   * Holds the record (none: not added, false), adds the entry with those beyond the
   * hold taken out (`write`, which returns the entries it took out, EntriesTakenOut),
   * then says it is listed (which drops the records beyond) and releases those dropped
   * for `maxEntries`. Dropped for the bound (said and counted): an entry taken out whose
   * record went too; a record held without its entry, or an entry whose record stays
   * (held again: an add in flight lists it again), is no dead letter lost.
   * `write` gets this hold's number (none without records), to keep with the entry
   * (the highest it was written under), and takes one named out only if that is at
   * most the number it was named with: higher, it was held again since and written by
   * that add, and its record stays (`listed`), so neither goes unsaid.
   */
  async add(
    entry: DeadLetter,
    write: (hold: number | undefined, beyond: HeldRecord[]) => Promise<EntriesTakenOut>,
  ): Promise<boolean> {
    const records = this.#records;
    const id = entry.executionId;
    const held = records ? await records.hold(id) : undefined;
    if (held && !held.held) return false;
    const { overCount, beyond } = await write(held?.hold, held?.beyond ?? []);
    // Not after a failed write: the entry may be listed or not, so the record stays out
    // of the bound's reach (until it expires) rather than be dropped under it.
    if (records && held) {
      const gone = new Set(await records.listed(id, held.hold, held.beyond));
      const lost = beyond.filter((named) => gone.has(named));
      if (lost.length > 0) this.#dropped(lost, 'bytes');
    }
    if (overCount.length > 0) {
      this.#dropped(
        overCount.map((out) => out.id),
        'count',
      );
      await records?.release(overCount);
    }
    return true;
  }

  /** DeadLetterStore.release: the record of an entry taken is an ordinary one again. */
  async release(taken: TakenDeadLetter): Promise<void> {
    await this.#records?.release([{ id: taken.entry.executionId, hold: taken.hold }]);
  }

  /** A list's stats: its `entries`, the bytes its held records take, what it dropped. */
  async stats(entries: Promise<number>): Promise<BoundedStoreStats> {
    const [count, bytes] = await Promise.all([entries, this.#records?.heldBytes() ?? 0]);
    return { bytes, entries: count, evictions: { ...this.evictions } };
  }

  #dropped(ids: string[], reason: DeadLetterDropReason): void {
    this.evictions[reason] += ids.length;
    this.#listener?.(ids, reason);
  }
}

/** One process (embedded mode): lost with the process, like its executions. */
export class MemoryDeadLetterStore implements DeadLetterStore, BoundedStore {
  readonly storeName = 'dead-letters';
  /**
   * In dead-letter order (deadLetterTime), oldest first; `hold`: the number of the hold
   * of its record it was written under (DeadLetterHolds.add).
   */
  #entries = new Map<string, { entry: DeadLetter; addedMs: number; hold?: number }>();
  /** The latest dead-letter time added (an entry added with an earlier one is put in order). */
  #latestMs = -Infinity;
  readonly #max: number;
  readonly #ttlMs: number;
  readonly #holds: DeadLetterHolds;
  readonly #now: () => number;

  constructor(options: DeadLetterStoreOptions = {}) {
    this.#max = options.maxEntries ?? DEAD_LETTER_DEFAULTS.maxEntries;
    this.#ttlMs = options.ttlMs ?? DEAD_LETTER_DEFAULTS.ttlMs;
    this.#holds = new DeadLetterHolds(options);
    this.#now = options.now ?? Date.now;
  }

  add(entry: DeadLetter): Promise<boolean> {
    return this.#holds.add(entry, (hold, named) => {
      const cutoff = this.#now() - this.#ttlMs;
      const beyond: string[] = [];
      for (const { id, hold: number } of named) {
        const listed = this.#entries.get(id);
        if (!listed || (listed.hold !== undefined && listed.hold > number)) continue;
        this.#entries.delete(id);
        if (listed.addedMs < cutoff) this.#holds.evictions.expired++;
        else beyond.push(id);
      }
      // The highest number it was written under (two adds may write in the other order).
      const before = this.#entries.get(entry.executionId)?.hold;
      const number = before === undefined || hold === undefined ? hold : Math.max(before, hold);
      const held = {
        entry: structuredClone(entry),
        addedMs: deadLetterTime(entry, this.#now()),
        ...(number !== undefined ? { hold: number } : {}),
      };
      this.#entries.delete(entry.executionId);
      this.#entries.set(entry.executionId, held);
      if (held.addedMs >= this.#latestMs) this.#latestMs = held.addedMs;
      else {
        // Added again with its earlier time (rare): back in order, for the sweep and list.
        const all = [...this.#entries.values()].sort((a, b) => a.addedMs - b.addedMs);
        this.#entries = new Map(all.map((h) => [h.entry.executionId, h]));
      }
      return Promise.resolve({ overCount: this.#sweep(), beyond });
    });
  }

  get(executionId: string): Promise<DeadLetter | undefined> {
    this.#sweep();
    const held = this.#entries.get(executionId);
    return Promise.resolve(held ? structuredClone(held.entry) : undefined);
  }

  async list(filter: DeadLetterFilter): Promise<DeadLetter[]> {
    this.#sweep();
    const limit = listLimit(filter);
    const found: DeadLetter[] = [];
    for (const { entry } of [...this.#entries.values()].reverse()) {
      if (!matchesDeadLetter(entry, filter)) continue;
      if (filter.namespaceReadable && !(await filter.namespaceReadable(entry.namespace))) continue;
      found.push(structuredClone(entry));
      if (found.length === limit) break;
    }
    return found;
  }

  take(executionId: string): Promise<TakenDeadLetter | undefined> {
    this.#sweep();
    const held = this.#entries.get(executionId);
    if (!held) return Promise.resolve(undefined);
    this.#entries.delete(executionId);
    return Promise.resolve({
      entry: held.entry,
      ...(held.hold !== undefined ? { hold: held.hold } : {}),
    });
  }

  release(taken: TakenDeadLetter): Promise<void> {
    return this.#holds.release(taken);
  }

  count(): Promise<number> {
    this.#sweep();
    return Promise.resolve(this.#entries.size);
  }

  stats(): Promise<BoundedStoreStats> {
    return this.#holds.stats(this.count());
  }

  /**
   * Drops the expired entries (their records expire a minute later on their own) and
   * those beyond `maxEntries`, oldest first; returns the latter, with their numbers.
   */
  #sweep(): ReleasedRecord[] {
    const cutoff = this.#now() - this.#ttlMs;
    const overCount: ReleasedRecord[] = [];
    for (const [id, held] of this.#entries) {
      if (held.addedMs < cutoff) {
        this.#entries.delete(id);
        this.#holds.evictions.expired++;
      } else if (this.#entries.size > this.#max) {
        this.#entries.delete(id);
        overCount.push(held.hold !== undefined ? { id, hold: held.hold } : { id });
      } else break;
    }
    return overCount;
  }
}
