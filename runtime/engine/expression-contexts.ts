// The execution contexts one pool worker holds (ADR 0048, amended 2026-11-28 (night)):
// an execution's trigger record goes to a worker with the first call of that execution
// the worker takes, and stays there under the context's key for the calls that follow,
// so a record of 64 KB is copied once per execution and worker, not once per call.
//
// This is the pool's account of what its worker holds. It is exact because the pool
// alone decides, and tells the worker with its next message (IPC keeps their order):
// a record kept, the least recently used ones evicted to stay within the worker's byte
// bound (the worker's heap is bounded too), the ones of ended executions dropped.

/** What to tell the worker with a message, and to record once it was sent. */
export interface ContextChange {
  /** Kept from now on: the key and the bytes of its record (as JSON). */
  keep?: { key: number; bytes: number };
  /** Forgotten from now on: evicted or ended. */
  drop: number[];
}

export class WorkerContexts {
  /** Bytes of each context held, by key, the least recently used first. */
  readonly #held = new Map<number, number>();
  /** Contexts of ended executions, dropped by the worker with the next message. */
  #ended: number[] = [];
  #bytes = 0;
  readonly maxBytes: number;

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  /** Contexts held, and their bytes (as JSON). */
  get size(): number {
    return this.#held.size;
  }

  get bytes(): number {
    return this.#bytes;
  }

  /** True when the worker holds `key`: it is then the most recently used. */
  use(key: number): boolean {
    const bytes = this.#held.get(key);
    if (bytes === undefined) return false;
    this.#held.delete(key);
    this.#held.set(key, bytes);
    return true;
  }

  /**
   * The change that keeps a record of `bytes` under `key` (none kept when it alone is
   * over the bound): the least recently used contexts evicted to make room, and the
   * ended ones. Nothing changes until `sent`.
   */
  keeping(key: number, bytes: number): ContextChange {
    const drop = [...this.#ended];
    if (bytes > this.maxBytes) return { drop };
    let room = this.maxBytes - this.#bytes;
    for (const [held, heldBytes] of this.#held) {
      if (room >= bytes) break;
      drop.push(held);
      room += heldBytes;
    }
    return { keep: { key, bytes }, drop };
  }

  /** The change of a message that keeps nothing new: the ended contexts dropped. */
  dropping(): ContextChange {
    return { drop: [...this.#ended] };
  }

  /** The message with `change` reached the worker: its account follows. */
  sent(change: ContextChange): void {
    for (const key of change.drop) this.#forget(key);
    this.#ended = this.#ended.filter((key) => !change.drop.includes(key));
    if (change.keep) {
      this.#held.set(change.keep.key, change.keep.bytes);
      this.#bytes += change.keep.bytes;
    }
  }

  /** `key`'s execution ended: true when the worker holds it (it is told with the next message). */
  end(key: number): boolean {
    if (!this.#forget(key)) return false;
    this.#ended.push(key);
    return true;
  }

  /** Ended contexts the worker has not been told of yet. */
  get pendingDrops(): number {
    return this.#ended.length;
  }

  #forget(key: number): boolean {
    const bytes = this.#held.get(key);
    if (bytes === undefined) return false;
    this.#held.delete(key);
    this.#bytes -= bytes;
    return true;
  }
}
