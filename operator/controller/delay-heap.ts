// The waiting room of the delaying work queue: keys with the time they become ready,
// earliest first (client-go's waitForPriorityQueue, a binary heap). Each key waits at
// most once; adding it again with an earlier time moves it up, a later time is
// ignored. Taking the ready keys and finding the next time are O(log n), so 10,000
// keys waiting to be looked at again (RequeueAfter) cost no scan per add.

interface Waiting {
  key: string;
  readyAt: number;
  /** Tie-breaker: insertion order among keys ready at the same instant. */
  seq: number;
}

const before = (a: Waiting, b: Waiting): boolean =>
  a.readyAt < b.readyAt || (a.readyAt === b.readyAt && a.seq < b.seq);

export class DelayHeap {
  #heap: Waiting[] = [];
  /** The live entry of each waiting key; heap entries not in here are stale. */
  readonly #byKey = new Map<string, Waiting>();
  #seq = 0;

  get size(): number {
    return this.#byKey.size;
  }

  /** Make `key` ready at `readyAt`, unless it already waits for an earlier time. */
  add(key: string, readyAt: number): void {
    const existing = this.#byKey.get(key);
    if (existing && existing.readyAt <= readyAt) return;
    const entry = { key, readyAt, seq: this.#seq++ };
    this.#byKey.set(key, entry);
    this.#push(entry);
    // A moved-up key leaves its old entry behind; rebuild before they pile up.
    if (this.#heap.length > 2 * this.#byKey.size + 1024) this.#rebuild();
  }

  /** The earliest ready time, or undefined when nothing waits. */
  nextAt(): number | undefined {
    this.#dropStale();
    return this.#heap[0]?.readyAt;
  }

  /** Remove and return the keys ready at `now`, earliest (then first added) first. */
  takeReady(now: number): string[] {
    const ready: string[] = [];
    for (;;) {
      this.#dropStale();
      const top = this.#heap[0];
      if (!top || top.readyAt > now) return ready;
      this.#pop();
      this.#byKey.delete(top.key);
      ready.push(top.key);
    }
  }

  clear(): void {
    this.#heap = [];
    this.#byKey.clear();
  }

  #dropStale(): void {
    for (;;) {
      const top = this.#heap[0];
      if (!top || this.#byKey.get(top.key) === top) return;
      this.#pop();
    }
  }

  #rebuild(): void {
    this.#heap = [];
    for (const entry of this.#byKey.values()) this.#push(entry);
  }

  #push(entry: Waiting): void {
    const heap = this.#heap;
    heap.push(entry);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(entry, heap[parent] as Waiting)) break;
      heap[i] = heap[parent] as Waiting;
      i = parent;
    }
    heap[i] = entry;
  }

  #pop(): void {
    const heap = this.#heap;
    const last = heap.pop() as Waiting;
    if (heap.length === 0) return;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= heap.length) break;
      const right = left + 1;
      const child =
        right < heap.length && before(heap[right] as Waiting, heap[left] as Waiting) ? right : left;
      if (!before(heap[child] as Waiting, last)) break;
      heap[i] = heap[child] as Waiting;
      i = child;
    }
    heap[i] = last;
  }
}
