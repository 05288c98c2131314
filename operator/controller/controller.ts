// A controller: a work queue of object keys and a pool of workers that reconcile them
// (controller-runtime's internal/controller). Keys are deduplicated, one reconcile per
// key is in flight at a time, different keys run in parallel, and the result decides
// what happens next:
//
//   resolved, no result          -> forget (reset backoff)          result=success
//   { requeueAfterMs: n > 0 }    -> forget, add after n ms           result=requeue_after
//   { requeue: true }            -> add rate-limited (backoff grows) result=requeue
//   throws TerminalError         -> forget, not requeued             result=error
//   throws anything else         -> add rate-limited (backoff grows) result=error
//
// Keys enqueued before `start()` wait in the queue: the operator enqueues everything
// its source reports during the initial list and starts the workers once the source
// has synced, so nothing is reconciled against a partial cache (O8).
import { realClock, type Clock } from './clock.ts';
import type { OperatorMetrics, ReconcileResult } from './metrics.ts';
import type { RateLimiter } from './rate-limiter.ts';
import { WorkQueue } from './workqueue.ts';

/**
 * An error that retrying cannot fix (an invalid spec, a missing reference that only a
 * user can add). The controller records it and does not requeue the key; a later
 * change to the object enqueues it again. Like controller-runtime's TerminalError it
 * is recognised anywhere in the `cause` chain.
 */
export class TerminalError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'TerminalError';
  }
}

/** Whether `err` or anything in its `cause` chain is a TerminalError. */
export function isTerminalError(err: unknown): boolean {
  const seen = new Set<unknown>();
  let e: unknown = err;
  while (e instanceof Error && !seen.has(e)) {
    if (e instanceof TerminalError) return true;
    seen.add(e);
    e = e.cause;
  }
  return false;
}

/** What a reconcile may ask for besides "done". */
export interface ReconcileOutcome {
  /** Reconcile this key again after this many milliseconds (backoff is reset). */
  requeueAfterMs?: number;
  /** Reconcile again after the rate limiter's backoff, without it being an error. */
  requeue?: boolean;
}

export type ReconcileFn = (key: string) => Promise<ReconcileOutcome | void>;

export type LogFn = (msg: string, fields?: object) => void;

export interface ControllerOptions {
  /** Names the controller in logs and metrics (`controller` label) and its queue (`name` label). */
  name: string;
  /** Reconcile one key. Throw to retry with backoff; throw TerminalError to give up. */
  reconcile: ReconcileFn;
  /** Parallel workers, each on a different key. Default 4. */
  workers?: number;
  metrics?: OperatorMetrics;
  log?: LogFn;
  /** Injected time for the queue's delays and the stop timeout (tests). */
  clock?: Clock;
  /** Defaults to client-go's default controller rate limiter. */
  rateLimiter?: RateLimiter;
}

/** controller-runtime's default graceful shutdown timeout. */
export const DEFAULT_DRAIN_TIMEOUT_MS = 30_000;

export class Controller {
  readonly name: string;
  readonly queue: WorkQueue;
  readonly #reconcile: ReconcileFn;
  readonly #workerCount: number;
  readonly #metrics: OperatorMetrics | undefined;
  readonly #log: LogFn;
  readonly #clock: Clock;
  #workers: Promise<void>[] = [];
  #started = false;
  #stopping = false;

  constructor(opts: ControllerOptions) {
    this.name = opts.name;
    this.#reconcile = opts.reconcile;
    this.#workerCount = Math.max(1, opts.workers ?? 4);
    this.#metrics = opts.metrics;
    this.#log = opts.log ?? (() => {});
    this.#clock = opts.clock ?? realClock;
    this.queue = new WorkQueue({
      name: opts.name,
      clock: this.#clock,
      ...(opts.rateLimiter ? { rateLimiter: opts.rateLimiter } : {}),
      ...(opts.metrics ? { metrics: opts.metrics.queue(opts.name) } : {}),
    });
  }

  /** Ask for `key` to be reconciled. Cheap and idempotent; ignored after `stop`. */
  enqueue(key: string): void {
    this.queue.add(key);
  }

  /** Start the workers. Call once, after the resource source has synced. */
  start(): void {
    if (this.#started) throw new Error(`controller ${this.name} already started`);
    if (this.#stopping) throw new Error(`controller ${this.name} is stopped`);
    this.#started = true;
    this.#log('Starting workers', { controller: this.name, workers: this.#workerCount });
    for (let i = 0; i < this.#workerCount; i++) this.#workers.push(this.#worker());
  }

  /**
   * Stop taking keys and wait for in-flight reconciles to finish, at most
   * `drainTimeoutMs` (default 30 s). Keys still queued are dropped: the next leader
   * lists everything again.
   */
  async stop(drainTimeoutMs = DEFAULT_DRAIN_TIMEOUT_MS): Promise<void> {
    if (this.#stopping) {
      this.queue.shutDown();
      return;
    }
    this.#stopping = true;
    this.#log('Stopping workers', { controller: this.name });
    // The workers take no key from now on (#worker), so the wait is for the reconciles
    // in flight, not the queue's drain: a key queued again while it was reconciled is put
    // back by done() and would be waited for until the timeout (client-go's drain hands
    // such keys out again; these workers have stopped taking them).
    this.queue.shutDown();
    const drained = Promise.all(this.#workers);
    let cancel = (): void => {};
    const timedOut = new Promise<boolean>((resolve) => {
      cancel = this.#clock.setTimer(() => resolve(true), drainTimeoutMs);
    });
    const late = await Promise.race([drained.then(() => false), timedOut]);
    cancel();
    if (late) {
      this.#log('Drain timed out; reconciles still in flight were abandoned', {
        controller: this.name,
        timeoutMs: drainTimeoutMs,
      });
    }
    this.queue.shutDown();
  }

  async #worker(): Promise<void> {
    while (!this.#stopping) {
      const key = await this.queue.get();
      if (key === undefined) return;
      if (this.#stopping) {
        this.queue.done(key);
        return;
      }
      try {
        await this.#reconcileHandler(key);
      } finally {
        this.queue.done(key);
      }
    }
  }

  async #reconcileHandler(key: string): Promise<void> {
    const started = performance.now();
    this.#metrics?.activeWorkers.inc({ controller: this.name });
    let result: ReconcileResult;
    let terminal = false;
    try {
      const outcome = await this.#reconcile(key);
      result = this.#handleOutcome(key, outcome);
    } catch (err) {
      result = 'error';
      terminal = isTerminalError(err);
      if (terminal) {
        this.queue.forget(key);
      } else if (!this.#stopping) {
        this.queue.addRateLimited(key);
      }
      this.#log('Reconciler error', {
        controller: this.name,
        key,
        terminal,
        error: err instanceof Error ? err.message : String(err),
      });
    } finally {
      this.#metrics?.activeWorkers.dec({ controller: this.name });
    }
    this.#metrics?.observeReconcile(
      this.name,
      result,
      (performance.now() - started) / 1000,
      terminal,
    );
  }

  #handleOutcome(key: string, outcome: ReconcileOutcome | void): ReconcileResult {
    if (outcome && outcome.requeueAfterMs !== undefined && outcome.requeueAfterMs > 0) {
      this.queue.forget(key);
      this.queue.addAfter(key, outcome.requeueAfterMs);
      return 'requeue_after';
    }
    if (outcome?.requeue) {
      this.queue.addRateLimited(key);
      return 'requeue';
    }
    this.queue.forget(key);
    return 'success';
  }
}
