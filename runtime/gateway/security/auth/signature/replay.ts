// Replay protection of signed deliveries: a delivery's replay key (its id, or its
// signature when the scheme has no id) is claimed once, for as long as the delivery
// could still be accepted. claim() is atomic per key: of many concurrent claims exactly
// one wins. Adapters: memory (one process) and Redis (SET NX PX, shared by replicas).

export interface ReplayStore {
  /** True when the key was free and is now held for `ttlMs`; false when already held. */
  claim(key: string, ttlMs: number): Promise<boolean>;
  /** Frees a claim (the delivery was refused after its signature was checked). */
  release(key: string): Promise<void>;
}

export interface MemoryReplayStoreOptions {
  /** Keys held at most; the oldest are dropped first. Default 100 000. */
  maxKeys?: number;
  now?: () => number;
}

export class MemoryReplayStore implements ReplayStore {
  /** Key → expiry (ms); insertion order is claim order, which the sweep relies on. */
  readonly #expiries = new Map<string, number>();
  readonly #maxKeys: number;
  readonly #now: () => number;

  constructor(options: MemoryReplayStoreOptions = {}) {
    this.#maxKeys = options.maxKeys ?? 100_000;
    this.#now = options.now ?? Date.now;
  }

  claim(key: string, ttlMs: number): Promise<boolean> {
    // Synchronous from lookup to insert: atomic on the event loop.
    const now = this.#now();
    const expiry = this.#expiries.get(key);
    if (expiry !== undefined && expiry > now) return Promise.resolve(false);
    this.#expiries.delete(key);
    this.#expiries.set(key, now + ttlMs);
    this.#sweep(now);
    return Promise.resolve(true);
  }

  release(key: string): Promise<void> {
    this.#expiries.delete(key);
    return Promise.resolve();
  }

  get size(): number {
    return this.#expiries.size;
  }

  /** Drops expired keys from the oldest claims on, and the oldest beyond maxKeys. */
  #sweep(now: number): void {
    for (const [key, expiry] of this.#expiries) {
      if (this.#expiries.size <= this.#maxKeys && expiry > now) break;
      this.#expiries.delete(key);
    }
  }
}
