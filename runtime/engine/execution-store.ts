// The executions store: finished and running executions with their per-run logs and
// event streams, for Flow Management (list, per-run log) and for late SSE subscribers.
import type { Execution, ExecutionFilter, SequencedEvent } from './ports.ts';

export interface ExecutionStore {
  /**
   * Insert or replace an execution. The store may keep the object it is given: the
   * caller hands it over and changes it afterwards only to save it again. Readers
   * (get, list) always receive copies.
   */
  save(execution: Execution): Promise<void>;
  get(id: string): Promise<Execution | undefined>;
  /** Newest first (by createdAt); `since` inclusive, `until` exclusive; limit default 50. */
  list(filter: ExecutionFilter): Promise<Execution[]>;
  /** Append events (in seq order) to an execution's stream. Events are never changed once emitted. */
  appendEvents(events: SequencedEvent[]): Promise<void>;
  /** Events of an execution with seq > afterSeq, in order. */
  events(id: string, afterSeq: number): Promise<SequencedEvent[]>;
}

export interface MemoryExecutionStoreOptions {
  /** Keep at most this many executions; the oldest are dropped first. Default 10 000. */
  maxExecutions?: number;
  /** Drop executions this long after they were created. Default 24 h. */
  ttlMs?: number;
  /** Clock (tests). */
  now?: () => number;
}

export const DEFAULT_LIST_LIMIT = 50;
export const MAX_LIST_LIMIT = 1000;

interface Entry {
  id: string;
  execution: Execution;
  createdMs: number;
  events: SequencedEvent[];
}

/**
 * In-memory adapter. Bounded: at most `maxExecutions` entries (insertion order, oldest
 * evicted first) and each entry lives `ttlMs` from its creation. Expired entries are
 * swept on writes and hidden on reads.
 */
export class MemoryExecutionStore implements ExecutionStore {
  readonly #entries = new Map<string, Entry>();
  /**
   * Entries in insertion order, for eviction: a queue with a moving head, because a Map
   * iterated from its start walks over every entry deleted since its last rehash (the
   * evicted ones are all at the front), which made each save of a full store cost ~8 µs.
   * Entries already dropped on read stay here until the head passes them.
   */
  #order: Entry[] = [];
  #head = 0;
  readonly #max: number;
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor(options: MemoryExecutionStoreOptions = {}) {
    this.#max = options.maxExecutions ?? 10_000;
    this.#ttlMs = options.ttlMs ?? 24 * 3_600_000;
    this.#now = options.now ?? Date.now;
  }

  save(execution: Execution): Promise<void> {
    // Kept as given (see the port): copying here cost more than the rest of a request.
    const existing = this.#entries.get(execution.id);
    if (existing) {
      existing.execution = execution;
    } else {
      const entry: Entry = {
        id: execution.id,
        execution,
        createdMs: Date.parse(execution.createdAt) || this.#now(),
        events: [],
      };
      this.#entries.set(execution.id, entry);
      this.#order.push(entry);
      this.#sweep();
    }
    return Promise.resolve();
  }

  get(id: string): Promise<Execution | undefined> {
    const entry = this.#live(id);
    return Promise.resolve(entry ? structuredClone(entry.execution) : undefined);
  }

  list(filter: ExecutionFilter): Promise<Execution[]> {
    const limit = Math.min(Math.max(1, filter.limit ?? DEFAULT_LIST_LIMIT), MAX_LIST_LIMIT);
    const since = filter.since ? Date.parse(filter.since) : undefined;
    const until = filter.until ? Date.parse(filter.until) : undefined;
    const cutoff = this.#now() - this.#ttlMs;
    const matches: Entry[] = [];
    for (const entry of this.#entries.values()) {
      const e = entry.execution;
      if (entry.createdMs < cutoff) continue;
      if (filter.workflowId !== undefined && e.workflowId !== filter.workflowId) continue;
      if (filter.triggerKey !== undefined && e.triggerKey !== filter.triggerKey) continue;
      if (filter.status !== undefined && e.status !== filter.status) continue;
      if (since !== undefined && entry.createdMs < since) continue;
      if (until !== undefined && entry.createdMs >= until) continue;
      matches.push(entry);
    }
    // Insertion order is creation order; stable sort keeps it for equal timestamps.
    matches.reverse();
    matches.sort((a, b) => b.createdMs - a.createdMs);
    return Promise.resolve(matches.slice(0, limit).map((m) => structuredClone(m.execution)));
  }

  appendEvents(events: SequencedEvent[]): Promise<void> {
    for (const event of events) {
      const entry = this.#entries.get(event.executionId);
      if (!entry) continue;
      const last = entry.events.at(-1);
      if (last && last.seq >= event.seq) continue;
      entry.events.push(event);
    }
    return Promise.resolve();
  }

  events(id: string, afterSeq: number): Promise<SequencedEvent[]> {
    const entry = this.#live(id);
    if (!entry) return Promise.resolve([]);
    return Promise.resolve(entry.events.filter((e) => e.seq > afterSeq).map((e) => ({ ...e })));
  }

  /** Number of entries held (tests). */
  get size(): number {
    return this.#entries.size;
  }

  #live(id: string): Entry | undefined {
    const entry = this.#entries.get(id);
    if (!entry) return undefined;
    if (entry.createdMs < this.#now() - this.#ttlMs) {
      this.#entries.delete(id);
      return undefined;
    }
    return entry;
  }

  /** Drops the oldest entries while there are too many or they have expired. */
  #sweep(): void {
    const cutoff = this.#now() - this.#ttlMs;
    const order = this.#order;
    while (this.#head < order.length) {
      const entry = order[this.#head] as Entry;
      // Not the entry of its id any more: dropped on read (and maybe saved again since).
      if (this.#entries.get(entry.id) === entry) {
        if (this.#entries.size <= this.#max && entry.createdMs >= cutoff) break;
        this.#entries.delete(entry.id);
      }
      this.#head++;
    }
    if (this.#head > 1024 && this.#head * 2 > order.length) {
      this.#order = order.slice(this.#head);
      this.#head = 0;
    }
  }
}
