// A port of client-go's util/workqueue (Typed queue + delaying queue + rate-limiting
// queue) for string keys, in one class:
//
// - Fair: keys are handed out in the order they were added (FIFO).
// - Stingy: a key added several times before it is taken is processed once; a key is
//   held by at most one worker at a time (between `get` and `done`).
// - A key added while it is being processed is marked dirty and queued again on
//   `done`, so the change that re-added it is never missed.
// - `addAfter` parks a key until its time comes (the earlier time wins on re-adds),
//   in a heap ordered by that time (delay-heap.ts), as client-go's priority queue;
//   `addRateLimited` asks the rate limiter how long to park it.
// - After `shutDown` adds are ignored and idle `get` calls resolve `undefined`; keys
//   already queued are still handed out, as in client-go. `shutDownWithDrain`
//   additionally resolves only when no key is being processed.
import { realClock, type CancelTimer, type Clock } from './clock.ts';
import { DelayHeap } from './delay-heap.ts';
import { defaultControllerRateLimiter, type RateLimiter } from './rate-limiter.ts';

/** Hooks the queue calls so a metrics provider can observe it (client-go queueMetrics). */
export interface QueueMetrics {
  /** A key was actually queued (collapsed duplicates are not counted). */
  added(): void;
  /** The number of queued keys changed. */
  depth(n: number): void;
  /** A key was re-added through the rate limiter. */
  retried(): void;
}

export interface WorkQueueOptions {
  /** Name used by metrics and logs. */
  name?: string;
  clock?: Clock;
  /** Defaults to `defaultControllerRateLimiter(clock)`. */
  rateLimiter?: RateLimiter;
  metrics?: QueueMetrics;
}

export class WorkQueue {
  readonly name: string;
  readonly #clock: Clock;
  readonly #rateLimiter: RateLimiter;
  readonly #metrics: QueueMetrics | undefined;

  // FIFO of queued keys: `#queue[#head..]` (the prefix is compacted away lazily).
  #queue: string[] = [];
  #head = 0;
  /** Keys that need processing: queued, or re-added while processing. */
  readonly #dirty = new Set<string>();
  /** Keys currently held by a worker. */
  readonly #processing = new Set<string>();
  /** Workers blocked in `get`, oldest first. */
  #getters: ((key: string | undefined) => void)[] = [];
  #shuttingDown = false;
  #drain = false;
  #drainWaiters: (() => void)[] = [];

  // Delaying part.
  readonly #waiting = new DelayHeap();
  #timer: { at: number; cancel: CancelTimer } | undefined;

  constructor(opts: WorkQueueOptions = {}) {
    this.name = opts.name ?? 'workqueue';
    this.#clock = opts.clock ?? realClock;
    this.#rateLimiter = opts.rateLimiter ?? defaultControllerRateLimiter(this.#clock);
    this.#metrics = opts.metrics;
  }

  /** Queue `key` for processing; a no-op if it is already queued or after shutdown. */
  add(key: string): void {
    if (this.#shuttingDown || this.#dirty.has(key)) return;
    this.#metrics?.added();
    this.#dirty.add(key);
    if (this.#processing.has(key)) return;
    this.#push(key);
  }

  /** Queue `key` once `ms` milliseconds have passed. The earliest pending time wins. */
  addAfter(key: string, ms: number): void {
    if (this.#shuttingDown) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    this.#waiting.add(key, this.#clock.now() + ms);
    this.#armTimer();
  }

  /** Queue `key` after the delay the rate limiter assigns it (one more failure). */
  addRateLimited(key: string): void {
    if (this.#shuttingDown) return;
    this.#metrics?.retried();
    this.addAfter(key, this.#rateLimiter.when(key));
  }

  /** The key succeeded: reset its backoff. Does not remove it from the queue. */
  forget(key: string): void {
    this.#rateLimiter.forget(key);
  }

  numRequeues(key: string): number {
    return this.#rateLimiter.numRequeues(key);
  }

  /**
   * Take the next key, waiting for one if the queue is empty. The caller must call
   * `done(key)` when it has finished with it. Resolves `undefined` once the queue is
   * shut down and empty.
   */
  get(): Promise<string | undefined> {
    if (this.#length() > 0) return Promise.resolve(this.#take());
    if (this.#shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.#getters.push(resolve));
  }

  /** The worker finished `key`. If it was re-added meanwhile, it is queued again. */
  done(key: string): void {
    this.#processing.delete(key);
    if (this.#dirty.has(key)) {
      this.#push(key);
    } else if (this.#processing.size === 0) {
      this.#notifyDrained();
    }
  }

  /** Number of keys queued and not yet taken (delayed keys are not counted). */
  len(): number {
    return this.#length();
  }

  /** Whether `shutDown` or `shutDownWithDrain` was called. */
  shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  /** Ignore further adds, drop delayed keys and wake idle workers with `undefined`. */
  shutDown(): void {
    this.#shuttingDown = true;
    this.#drain = false;
    this.#stopDelaying();
    this.#releaseGetters();
    this.#notifyDrained();
  }

  /**
   * Like `shutDown`, but resolves only once every key handed out has been `done`.
   * A later `shutDown` call (a second SIGTERM) resolves it immediately.
   */
  shutDownWithDrain(): Promise<void> {
    this.#shuttingDown = true;
    this.#drain = true;
    this.#stopDelaying();
    this.#releaseGetters();
    if (this.#processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.#drainWaiters.push(resolve);
    });
  }

  #length(): number {
    return this.#queue.length - this.#head;
  }

  #push(key: string): void {
    this.#queue.push(key);
    this.#metrics?.depth(this.#length());
    const getter = this.#getters.shift();
    if (getter) getter(this.#take());
  }

  #take(): string {
    const key = this.#queue[this.#head] as string;
    this.#head++;
    if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
      this.#queue = this.#queue.slice(this.#head);
      this.#head = 0;
    }
    this.#processing.add(key);
    this.#dirty.delete(key);
    this.#metrics?.depth(this.#length());
    return key;
  }

  #releaseGetters(): void {
    if (this.#length() > 0) return;
    const getters = this.#getters;
    this.#getters = [];
    for (const g of getters) g(undefined);
  }

  #notifyDrained(): void {
    if (this.#drain && this.#processing.size > 0) return;
    const waiters = this.#drainWaiters;
    this.#drainWaiters = [];
    for (const w of waiters) w();
  }

  // --- delaying queue ---

  #armTimer(): void {
    const next = this.#waiting.nextAt();
    if (next === undefined) {
      this.#timer?.cancel();
      this.#timer = undefined;
      return;
    }
    if (this.#timer && this.#timer.at <= next) return;
    this.#timer?.cancel();
    const at = next;
    this.#timer = { at, cancel: this.#clock.setTimer(() => this.#fire(), at - this.#clock.now()) };
  }

  #fire(): void {
    this.#timer = undefined;
    for (const key of this.#waiting.takeReady(this.#clock.now())) this.add(key);
    this.#armTimer();
  }

  #stopDelaying(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#waiting.clear();
  }
}
