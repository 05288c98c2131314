// The in-process engine's run queue, fair across namespaces (ADR 0049): what waits for a
// run slot, in one bucket per namespace, and how many slots each namespace holds. The
// next free slot goes to the namespace that holds the fewest (ties: the one whose first
// waiting execution came first); within a namespace, arrival order.
//
// Cost: a bucket is found by its namespace (one Map lookup) when an execution is queued
// and when its run ends; picking the next one looks at the buckets that have executions
// waiting, so it is O(1) while one namespace waits (the usual case) and O(namespaces
// waiting) at worst. No timer, no sort. A bucket's arrays keep their room when it empties
// (up to COMPACT_AFTER places), and the last bucket let go is used again for the next
// namespace: one namespace that comes and goes allocates nothing here.

/** The bucket of executions without a namespace (a Kubernetes namespace is never empty). */
export const NO_NAMESPACE = '';

interface Bucket<T> {
  namespace: string;
  /** Run slots its executions hold now. */
  running: number;
  /** Waiting items from `head` to before `tail` (a deque: taking the first is O(1)). */
  items: (T | undefined)[];
  /** Arrival number of each item, at the same index. */
  arrivals: number[];
  head: number;
  tail: number;
  /** Its index in the ready list while it has items waiting; -1 otherwise. */
  ready: number;
}

/**
 * Taken items are compacted away once at least this many lead a bucket's array; an empty
 * bucket whose arrays grew past it gets new ones (a burst's room is not kept).
 */
const COMPACT_AFTER = 1024;

export class FairQueue<T> {
  readonly #buckets = new Map<string, Bucket<T>>();
  /** Buckets with items waiting, in no order (removed by swapping with the last). */
  readonly #ready: Bucket<T>[] = [];
  /** The last bucket let go (nothing held, nothing waiting), for the next namespace. */
  #spare: Bucket<T> | undefined;
  #length = 0;
  #arrivals = 0;

  /** Items waiting, all namespaces. */
  get length(): number {
    return this.#length;
  }

  /** Namespaces with items waiting. */
  get namespacesWaiting(): number {
    return this.#ready.length;
  }

  /** Namespaces that hold a run slot or have items waiting. */
  get namespaces(): number {
    return this.#buckets.size;
  }

  /** Items of `namespace` waiting. */
  waitingIn(namespace: string): number {
    const bucket = this.#buckets.get(namespace);
    return bucket === undefined ? 0 : bucket.tail - bucket.head;
  }

  /** Run slots `namespace` holds. */
  runningIn(namespace: string): number {
    return this.#buckets.get(namespace)?.running ?? 0;
  }

  /** Queues `item` after the others of its namespace. */
  push(namespace: string, item: T): void {
    let bucket = this.#buckets.get(namespace);
    if (bucket === undefined) {
      bucket = this.#spare ?? {
        namespace,
        running: 0,
        items: [],
        arrivals: [],
        head: 0,
        tail: 0,
        ready: -1,
      };
      this.#spare = undefined;
      bucket.namespace = namespace;
      this.#buckets.set(namespace, bucket);
    }
    bucket.items[bucket.tail] = item;
    bucket.arrivals[bucket.tail] = this.#arrivals++;
    bucket.tail++;
    this.#length++;
    if (bucket.ready < 0) {
      bucket.ready = this.#ready.length;
      this.#ready.push(bucket);
    }
  }

  /**
   * The item the next free slot goes to, counted as holding a slot of its namespace
   * until `finished(namespace)`; undefined when nothing waits.
   */
  take(): T | undefined {
    const bucket = this.#pick();
    if (bucket === undefined) return undefined;
    const { items, head } = bucket;
    const item = items[head] as T;
    items[head] = undefined;
    bucket.head = head + 1;
    this.#length--;
    bucket.running++;
    if (bucket.head === bucket.tail) {
      this.#emptied(bucket);
      this.#unready(bucket);
    } else if (bucket.head >= COMPACT_AFTER && bucket.head * 2 >= bucket.tail) {
      const waiting = bucket.tail - bucket.head;
      items.copyWithin(0, bucket.head, bucket.tail);
      bucket.arrivals.copyWithin(0, bucket.head, bucket.tail);
      items.fill(undefined, waiting, bucket.tail);
      bucket.head = 0;
      bucket.tail = waiting;
    }
    return item;
  }

  /** A run of `namespace` that `take` gave ended: its slot is free. */
  finished(namespace: string): void {
    const bucket = this.#buckets.get(namespace);
    if (bucket === undefined) return;
    bucket.running = Math.max(0, bucket.running - 1);
    if (bucket.running === 0 && bucket.ready < 0) this.#letGo(bucket);
  }

  /** Takes out every waiting item that `matches` (none counted running), oldest first. */
  remove(matches: (item: T) => boolean): T[] {
    const removed: { item: T; arrival: number }[] = [];
    for (const bucket of [...this.#ready]) {
      const keptItems: T[] = [];
      const keptArrivals: number[] = [];
      for (let i = bucket.head; i < bucket.tail; i++) {
        const item = bucket.items[i] as T;
        const arrival = bucket.arrivals[i] as number;
        if (matches(item)) removed.push({ item, arrival });
        else {
          keptItems.push(item);
          keptArrivals.push(arrival);
        }
      }
      bucket.items = keptItems;
      bucket.arrivals = keptArrivals;
      bucket.head = 0;
      bucket.tail = keptItems.length;
      if (keptItems.length === 0) {
        this.#unready(bucket);
        if (bucket.running === 0) this.#letGo(bucket);
      }
    }
    this.#length -= removed.length;
    return removed.sort((a, b) => a.arrival - b.arrival).map((r) => r.item);
  }

  /** Takes out every waiting item, oldest first. */
  drain(): T[] {
    return this.remove(() => true);
  }

  /** The bucket the next slot goes to: fewest running, then the oldest first item. */
  #pick(): Bucket<T> | undefined {
    const ready = this.#ready;
    if (ready.length <= 1) return ready[0];
    let best = ready[0] as Bucket<T>;
    for (let i = 1; i < ready.length; i++) {
      const bucket = ready[i] as Bucket<T>;
      if (
        bucket.running < best.running ||
        (bucket.running === best.running &&
          (bucket.arrivals[bucket.head] as number) < (best.arrivals[best.head] as number))
      )
        best = bucket;
    }
    return best;
  }

  /** Nothing waits in `bucket` any more: its arrays start again (room kept, unless large). */
  #emptied(bucket: Bucket<T>): void {
    bucket.head = 0;
    bucket.tail = 0;
    if (bucket.items.length > COMPACT_AFTER) {
      bucket.items = [];
      bucket.arrivals = [];
    }
  }

  /** `bucket` holds no slot and has nothing waiting: forgotten, kept as the spare. */
  #letGo(bucket: Bucket<T>): void {
    this.#buckets.delete(bucket.namespace);
    this.#spare = bucket;
  }

  #unready(bucket: Bucket<T>): void {
    const ready = this.#ready;
    const last = ready.pop() as Bucket<T>;
    if (last !== bucket) {
      ready[bucket.ready] = last;
      last.ready = bucket.ready;
    }
    bucket.ready = -1;
  }
}
