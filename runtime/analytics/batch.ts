// Request observations applied in batches instead of one at a time.
//
// The metrics and the memory store record every webhook request. Done inside each
// request, their code and data have been pushed out of the CPU caches by the rest of
// the request path, and the bookkeeping costs several times what it costs in a row.
// So observe() only queues, and the queue is applied once per turn of the event loop
// (setImmediate), or earlier by whoever reads the state: every read path calls flush()
// first, so what is read always includes every observation made before the read.
export class Batch<T> {
  #pending: T[] = [];
  readonly #apply: (item: T) => void;

  /** `apply` records one item; an item it throws for is dropped, the others still count. */
  constructor(apply: (item: T) => void) {
    this.#apply = apply;
  }

  push(item: T): void {
    if (this.#pending.push(item) === 1) setImmediate(this.flush);
  }

  /** Apply everything queued, now. */
  readonly flush = (): void => {
    const items = this.#pending;
    if (items.length === 0) return;
    this.#pending = [];
    for (const item of items) {
      try {
        this.#apply(item);
      } catch {
        // a bad observation must never break the others (or the process: this runs
        // from setImmediate); metrics are best effort
      }
    }
  };
}
