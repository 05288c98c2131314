// Reads of a record store kept in memory between changes: the worker looks up the
// route and the workflow of every job, and they change rarely. An entry is dropped
// when the store's change feed names its key, everything when the feed says anything
// may have changed (a reconnect), and any entry after `ttlMs` as a bound on a change
// the feed lost. Nothing is kept until the feed is live, and a read that overlapped a
// change is answered but not kept, so a cached value is never older than the newest
// change announced before it was read.
import type { RecordStore } from './records.ts';

export interface CachedReaderOptions<T> {
  store: RecordStore<T> & { ready?(): Promise<void> };
  /** Longest an entry is kept without a change being announced (default 5 s). */
  ttlMs?: number;
  /** Most entries kept; the oldest read is dropped first (default 5,000). */
  maxEntries?: number;
  now?: () => number;
}

interface Entry<T> {
  value: T;
  readAt: number;
}

export class CachedRecordReader<T> {
  readonly #store: RecordStore<T>;
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  readonly #now: () => number;
  readonly #entries = new Map<string, Entry<T>>();
  readonly #unsubscribe: () => void;
  /** Bumped by every announced change: a read that saw it bump is not kept. */
  #changes = 0;
  #live = false;
  /** Reads answered from memory, and from the store (for tests and metrics). */
  hits = 0;
  misses = 0;

  constructor(options: CachedReaderOptions<T>) {
    this.#store = options.store;
    this.#ttlMs = options.ttlMs ?? 5_000;
    this.#maxEntries = options.maxEntries ?? 5_000;
    this.#now = options.now ?? Date.now;
    this.#unsubscribe = this.#store.subscribe((key) => {
      this.#changes += 1;
      if (key === undefined) this.#entries.clear();
      else this.#entries.delete(key);
    });
    const ready = options.store.ready ? options.store.ready() : Promise.resolve();
    void ready.then(
      () => {
        this.#live = true;
      },
      () => undefined, // never live: every read goes to the store
    );
  }

  async get(key: string): Promise<T | undefined> {
    const entry = this.#entries.get(key);
    if (entry && this.#now() - entry.readAt < this.#ttlMs) {
      this.hits += 1;
      return entry.value;
    }
    this.misses += 1;
    const changes = this.#changes;
    const readAt = this.#now();
    const value = await this.#store.get(key);
    // Misses are not kept: a route or workflow that appears is used at once.
    if (value === undefined || !this.#live || changes !== this.#changes) return value;
    this.#entries.delete(key);
    this.#entries.set(key, { value, readAt });
    if (this.#entries.size > this.#maxEntries) {
      const oldest = this.#entries.keys().next().value as string;
      this.#entries.delete(oldest);
    }
    return value;
  }

  close(): void {
    this.#unsubscribe();
    this.#entries.clear();
  }
}
