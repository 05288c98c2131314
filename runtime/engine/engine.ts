// The in-process workflow engine: a bounded queue of executions run a few at a time
// (live-execution.ts: one execution's record and events while it is here), each by the
// interpreter (interpreter.ts, nodes/), and in Async Callback mode a callback once it
// has finished (callback-deliveries.ts).
import { randomUUID } from 'node:crypto';
import { HttpProblem } from '../errors.ts';
import { CallbackDeliveries, type RouteReader } from './callback-deliveries.ts';
import {
  deadLetterOf,
  holdsRecords,
  MemoryDeadLetterStore,
  type DeadLetterStore,
} from './dead-letters.ts';
import { CallbackSender, type CallbackSenderOptions, type DeliveryResult } from './callbacks.ts';
import { replayStored, type EventOutlet, type Listener } from './execution-events.ts';
import { ExecutionFailure } from './execution-failure.ts';
import {
  discardsSuccess,
  executionDiscarded,
  MemoryExecutionStore,
  type ExecutionStore,
} from './execution-store.ts';
import { ExpressionCache, type ExpressionLimits } from './expressions.ts';
import { FairQueue } from './fair-queue.ts';
import { Interpreter } from './interpreter.ts';
import type { NodeLimits } from './nodes/context.ts';
import { LiveExecution } from './live-execution.ts';
import { OutboundGuard, type OutboundGuardOptions } from './outbound/guard.ts';
import type {
  Execution,
  ExecutionEngine,
  ExecutionFilter,
  ExecutionPage,
  StartedExecution,
  StartRequest,
} from './ports.ts';
import { isRetryable, nextAttempt, resolveRetryPolicy } from './retry-policy.ts';
import { isoTime } from '../time.ts';
import type { TraceSpan, Tracing } from '../tracing/tracing.ts';
import { slotNamespace } from './trigger-ref.ts';
import { sleep, withExecutionId } from './util.ts';

export { ExecutionFailure } from './execution-failure.ts';

/** Retry-After of an in-process engine's refusal when its queue is full. */
export const IN_PROCESS_RETRY_AFTER_SECONDS = 5;

export interface InProcessEngineOptions {
  /**
   * Executions running at once; the rest wait in the queue. A free slot goes to the
   * waiting execution of the namespace that holds the fewest (ADR 0049). Default 64.
   */
  concurrency?: number;
  /**
   * Executions waiting at most; start() then rejects with HG_ERR_ENGINE_OVERLOADED,
   * except for a namespace under its share of it while others wait (ADR 0049: at most
   * twice this in all). Default 10 000.
   */
  maxQueued?: number;
  /** Node runs per execution before it fails as a probable loop. Default 1000. */
  maxSteps?: number;
  /** Longest delay node allowed. Default 15 min. */
  maxDelayMs?: number;
  /** Longest `request.timeout` of an http node (per attempt). Default 15 min. */
  maxHttpTimeoutMs?: number;
  /**
   * Longest one attempt of a run may take, from its first node: a run past it fails at
   * its next node, and a delay or an http attempt gets no more than what is left.
   * Default 1 h.
   */
  maxRunMs?: number;
  /** First wait between http node retries (doubles, with jitter). Default 200 ms. */
  httpBackoffMs?: number;
  /** Length of the input/output summaries in the per-run log. Default 1024. */
  summaryLength?: number;
  /** JSONata limits (timeout default 1000 ms, depth 500). */
  expressions?: ExpressionLimits;
  /** Where executions and their events are kept. Default: a MemoryExecutionStore. */
  store?: ExecutionStore;
  /** Address guard for http nodes and callbacks (allow-list, DNS lookup injection). */
  outbound?: OutboundGuard | OutboundGuardOptions;
  /**
   * Callback delivery: a sender, or options for the one the engine makes (which then
   * shares the engine's guard unless the options name one).
   */
  callbacks?: CallbackSender | CallbackSenderOptions;
  /**
   * Where a callback reads its trigger's route record before each delivery attempt, to
   * sign with the secrets it holds then (a Secret rotated during a delivery, ADR 0035);
   * asked at every attempt, so a cached reader. Without it, the secrets a start request
   * carries (`callbackSecrets`) sign all its attempts.
   */
  routes?: RouteReader;
  /**
   * Execution ids when the trigger output carries none (replays, dead-letter retries).
   * Default a UUID, as the gateway gives the executions it starts.
   */
  newId?: () => string;
  /** Called for errors that have no caller to go to (listener threw, store failed). */
  onInternalError?: (error: unknown, where: string) => void;
  /** Told about every finished execution and callback delivery (metrics). */
  observer?: EngineObserver;
  /**
   * Write events to the store as they are emitted (by the end of the event loop's turn;
   * respond, completed and failed at once) instead of all at the end (a worker: gateways
   * elsewhere relay them to waiting callers). Default false.
   */
  streamEvents?: boolean;
  /**
   * Where an execution waits for its next attempt (workflow spec.retry). Default: a
   * timer in this process, the execution staying hot. A worker hands it to the Redis
   * retry queue instead (retry-queue-redis.ts) and lets go of it.
   */
  retries?: RetryHandOff;
  /** Where executions that exhausted their retry policy go. Default: in memory. */
  deadLetters?: DeadLetterStore;
  /**
   * Distributed tracing (ADR 0040): a span per attempt, child of the record's `trace`,
   * a span per node run, a CLIENT span per outbound request. Off when absent.
   */
  tracing?: Tracing;
}

/** Keeps an execution between two attempts somewhere else than this process. */
export interface RetryHandOff {
  /**
   * Saves the record (status queued, `nextAttemptAt`) and schedules attempt
   * `execution.attempt + 1` for `dueAtMs`, atomically; the engine lets go of it after.
   */
  schedule(execution: Execution, request: StartRequest, dueAtMs: number): Promise<void>;
}

/**
 * Why start() refused an execution with HG_ERR_ENGINE_OVERLOADED (ADR 0049):
 * `queue_full`, the queue holds maxQueued (and no other namespace waits, or twice
 * maxQueued wait); `namespace_share`, the queue is full and the execution's namespace
 * holds its share of it while others wait.
 */
export type QueueRefusal = 'queue_full' | 'namespace_share';

export interface EngineObserver {
  executionFinished(execution: Execution): void;
  callbackDelivered(result: DeliveryResult): void;
  /** An attempt failed and another is scheduled (metrics: retries). */
  attemptRetried?(execution: Execution): void;
  /** An execution exhausted its retry policy and went to the dead-letter list. */
  deadLettered?(execution: Execution): void;
  /**
   * A succeeded execution's record and events were discarded (its workflow's
   * `spec.executionRecords.succeeded: Discard`, ADR 0041); told after executionFinished,
   * or once its callback was delivered.
   */
  executionDiscarded?(execution: Execution): void;
  /** start() refused an execution: the queue was full (metrics: refusals by reason). */
  queueRefused?(reason: QueueRefusal): void;
}

/** An engine's own dead-letter list: it holds the records of its entries in the store. */
function ownDeadLetters(store: ExecutionStore): DeadLetterStore {
  return new MemoryDeadLetterStore(holdsRecords(store) ? { records: store } : {});
}

/** The limits the node types obey, the engine's defaults filled in. */
function nodeLimits(options: InProcessEngineOptions): NodeLimits {
  return {
    maxDelayMs: options.maxDelayMs ?? 15 * 60_000,
    maxHttpTimeoutMs: options.maxHttpTimeoutMs ?? 15 * 60_000,
    maxRunMs: options.maxRunMs ?? 60 * 60_000,
    summaryLength: options.summaryLength ?? 1024,
    httpBackoffMs: options.httpBackoffMs ?? 200,
  };
}

export class InProcessEngine implements ExecutionEngine {
  readonly store: ExecutionStore;
  readonly callbacks: CallbackSender;
  readonly expressions: ExpressionCache;
  readonly outbound: OutboundGuard;
  readonly deadLetters: DeadLetterStore;
  /** Executions queued, running or waiting for their next attempt here. */
  readonly #hot = new Map<string, LiveExecution>();
  /** Executions waiting for a run slot, by namespace; slots held by namespace. */
  readonly #queue = new FairQueue<LiveExecution>();
  readonly #deliveries: CallbackDeliveries;
  readonly #interpreter: Interpreter;
  readonly #events: EventOutlet;
  readonly #concurrency: number;
  readonly #maxQueued: number;
  readonly #owned: { close(): Promise<void> }[] = [];
  readonly #newId: () => string;
  readonly #observer: EngineObserver | undefined;
  readonly #handOff: RetryHandOff | undefined;
  readonly #tracing: Tracing | undefined;
  /** Executions waiting in this process for their next attempt, with its timer. */
  readonly #waiting = new Map<string, NodeJS.Timeout>();
  /**
   * Runs whose hand-off to the retry queue, or whose dead-letter entry, could not be
   * written: the worker must not acknowledge their job (another worker redoes that step).
   */
  readonly #unfinished = new WeakMap<LiveExecution, unknown>();
  /** Resumed jobs whose record waits for the attempt they start (announced at the run). */
  readonly #attemptDue = new WeakSet<LiveExecution>();
  #running = 0;
  #closing = false;
  #aborting = false;

  constructor(options: InProcessEngineOptions = {}) {
    this.#concurrency = Math.max(1, options.concurrency ?? 64);
    this.#maxQueued = Math.max(0, options.maxQueued ?? 10_000);
    if (options.outbound instanceof OutboundGuard) {
      this.outbound = options.outbound;
    } else {
      this.outbound = new OutboundGuard(options.outbound ?? {});
      this.#owned.push(this.outbound);
    }
    const store = options.store ?? new MemoryExecutionStore();
    this.store = store;
    this.deadLetters = options.deadLetters ?? ownDeadLetters(store);
    this.#handOff = options.retries;
    this.#tracing = options.tracing;
    if (options.callbacks instanceof CallbackSender) {
      this.callbacks = options.callbacks;
    } else {
      const callbackOptions = options.callbacks ?? {};
      this.callbacks = new CallbackSender({ guard: this.outbound, ...callbackOptions });
      if (callbackOptions.guard) this.#owned.push(this.callbacks);
    }
    this.expressions = new ExpressionCache(options.expressions);
    this.#owned.push(this.expressions);
    this.#newId = options.newId ?? (() => randomUUID());
    const { observer } = options;
    this.#observer = observer;
    const onInternalError =
      options.onInternalError ??
      ((error: unknown, where: string) => console.error(`hookgate engine: ${where}:`, error));
    this.#interpreter = new Interpreter({
      expressions: this.expressions,
      outbound: this.outbound,
      maxSteps: Math.max(1, options.maxSteps ?? 1000),
      ...nodeLimits(options),
    });
    this.#events = {
      store: this.store,
      streamEvents: options.streamEvents ?? false,
      onInternalError,
    };
    this.#deliveries = new CallbackDeliveries({
      sender: this.callbacks,
      ...(options.routes ? { routes: options.routes } : {}),
      ...(observer ? { delivered: (result) => observer.callbackDelivered(result) } : {}),
      record: (execution, request) => this.#recordCallback(execution, request),
      onInternalError,
    });
  }

  /** Executions run at once at most (the option, defaults filled in). */
  get concurrency(): number {
    return this.#concurrency;
  }

  /** Executions running now. */
  get running(): number {
    return this.#running;
  }

  /** Executions waiting for a slot. */
  get queued(): number {
    return this.#waitingForSlot();
  }

  /**
   * The queue's executions beyond the free slots: those the next pump leaves waiting.
   * (start() pumps on the next turn, so the queue also holds executions about to run.)
   */
  #waitingForSlot(): number {
    return Math.max(0, this.#queue.length - Math.max(0, this.#concurrency - this.#running));
  }

  async start(request: StartRequest): Promise<StartedExecution> {
    if (this.#closing) throw new HttpProblem('HG_ERR_SHUTTING_DOWN', 'The engine is shutting down');
    const id = request.input.metadata.executionId || this.#newId();
    // As get(id), without its promise around the store's. Hot again after the read: a
    // start of the same id may have come in meanwhile.
    const hot = this.#hot.get(id);
    if (hot) return hot.snapshot();
    const existing = await this.store.get(id);
    if (existing) return existing;
    // An Idempotency-Key's hint may name an execution that succeeded and was discarded:
    // its tombstone says so (ADR 0041). Other starts do not look.
    const gone = request.hinted ? await this.store.discarded(id) : undefined;
    const live = this.#hot.get(id);
    if (live) return live.snapshot();
    if (gone) throw executionDiscarded(id, gone);
    // close() began during those reads: it may have found nothing hot and finished, and
    // nothing would wait for (or abort) a run admitted now.
    if (this.#closing) throw new HttpProblem('HG_ERR_SHUTTING_DOWN', 'The engine is shutting down');
    const namespace = slotNamespace(request.trigger);
    const refusal = this.#refusal(namespace);
    if (refusal !== undefined) {
      this.#observer?.queueRefused?.(refusal);
      // A constant (docs/errors.md): this process's queue drains at its own pace, which
      // a Redis queue's gateways measure (queue-state.ts) and this engine does not.
      throw new HttpProblem('HG_ERR_ENGINE_OVERLOADED', 'Too many executions are waiting', {
        headers: { 'retry-after': String(IN_PROCESS_RETRY_AFTER_SECONDS) },
      });
    }
    const input = withExecutionId(request.input, id);
    const execution: Execution = {
      id,
      workflowId: request.workflow.workflowId,
      triggerKey: request.trigger.key,
      status: 'queued',
      createdAt: isoTime(),
      input,
      log: [],
    };
    if (request.trigger.uid) execution.triggerUid = request.trigger.uid;
    if (request.accessDigest) execution.accessDigest = request.accessDigest;
    if (request.replayOf) execution.replayOf = request.replayOf;
    if (request.trace) execution.trace = request.trace;
    const admitted = this.#admit(
      execution,
      input === request.input ? request : { ...request, input },
      0,
    );
    // Saved first: a store may drop events of an execution it does not hold yet, and
    // with streamEvents this one is not written again at the end (see EventStream).
    try {
      await this.store.save(execution);
    } catch (error) {
      // Not queued: the engine lets go, so that a start of the same id (a retry under
      // its Idempotency-Key) finds no hot execution that would never run, and close()
      // does not wait for one.
      this.#hot.delete(id);
      admitted.ended();
      throw error;
    }
    // Pumped before the event is sent (both on the next turn): a store that appends a
    // turn's events together then gets this one with the run's first ones.
    this.#queue.push(namespace, admitted);
    this.#pumpSoon();
    admitted.stream.emit({ type: 'queued' }, execution.createdAt);
    // What the caller needs now (id, status, times), before the run starts changing it.
    return { ...execution, log: [], created: true };
  }

  /**
   * Runs an execution whose queued record already exists elsewhere (a worker taking a
   * job off the queue, or running it again after another worker died). `attempt` is the
   * job's: when the record waits for that attempt (`nextAttemptAt`), it starts now;
   * otherwise the record's own attempt runs again from its first node (its log lines
   * are dropped, earlier attempts' kept). Event numbering continues after `afterSeq`,
   * the events already stored. Resolves once the run has finished and its record is
   * saved, or the execution has been handed to the retry queue; rejects when that
   * hand-off failed, or the store did not take the record (before the run, which then
   * does not start, or at its end): the job must then stay unacknowledged, and runs again.
   *
   * `queueEntry`: the job's entry in a queue the store keeps (Redis: the stream of the
   * execution's shard), which the store acknowledges with the final record where it can
   * (ExecutionStore.saveWithEvents). Resolves true when it did; false when the caller
   * must acknowledge the job (a retry hand-off, a dead letter, a store without it).
   */
  resume(
    request: StartRequest,
    execution: Execution,
    afterSeq: number,
    attempt = 1,
    queueEntry?: string,
  ): Promise<boolean> {
    if (this.#closing) {
      return Promise.reject(new HttpProblem('HG_ERR_SHUTTING_DOWN', 'The engine is shutting down'));
    }
    const running = this.#hot.get(execution.id);
    if (running) return running.done.then(() => false);
    const current = execution.attempt ?? 1;
    const starting = execution.nextAttemptAt !== undefined && attempt > current;
    const kept = starting ? current + 1 : current;
    const fresh: Execution = {
      id: execution.id,
      workflowId: execution.workflowId,
      triggerKey: execution.triggerKey,
      status: 'queued',
      createdAt: execution.createdAt,
      input: execution.input,
      log: execution.log.filter((line) => (line.attempt ?? 1) < kept),
    };
    // Which trigger of that name the request came in on (ADR 0035), whatever the route is now.
    if (execution.triggerUid) fresh.triggerUid = execution.triggerUid;
    if (current > 1) fresh.attempt = current;
    if (execution.failedAttempts) fresh.failedAttempts = execution.failedAttempts;
    if (execution.replayOf) fresh.replayOf = execution.replayOf;
    if (execution.trace) fresh.trace = execution.trace;
    // The caller's link stays valid when a worker runs the queued record.
    if (execution.accessDigest) fresh.accessDigest = execution.accessDigest;
    const hot = this.#admit(fresh, { ...request, input: execution.input }, afterSeq, true);
    if (queueEntry !== undefined) hot.queueEntry = queueEntry;
    // Announced (attempt.started) when its run starts: a worker's job may wait here for
    // a slot (read ahead, ADR 0049), and one left to the queue at close() announced nothing.
    if (starting) this.#attemptDue.add(hot);
    this.#queue.push(slotNamespace(request.trigger), hot);
    this.#pump();
    return hot.done.then(() => {
      if (this.#unfinished.has(hot)) throw this.#unfinished.get(hot);
      return hot.stream.acknowledged;
    });
  }

  /**
   * Whether a start of `namespace` is refused, and why (ADR 0049). Under maxQueued
   * waiting, none is. At it, a namespace alone in the queue is (the bound as before);
   * while others wait, one is let in under its share, maxQueued / the namespaces waiting
   * (itself counted), rounded up, until twice maxQueued wait in all: a namespace that
   * filled the queue alone leaves room to the next ones, and is refused until it is
   * under its share again.
   */
  #refusal(namespace: string): QueueRefusal | undefined {
    const waiting = this.#waitingForSlot();
    if (waiting < this.#maxQueued) return undefined;
    const queue = this.#queue;
    const own = queue.waitingIn(namespace);
    const namespaces = queue.namespacesWaiting + (own === 0 ? 1 : 0);
    if (namespaces === 1 || waiting >= 2 * this.#maxQueued) return 'queue_full';
    return own >= Math.ceil(this.#maxQueued / namespaces) ? 'namespace_share' : undefined;
  }

  #admit(
    execution: Execution,
    request: StartRequest,
    seqBase: number,
    resumed = false,
  ): LiveExecution {
    const hot = new LiveExecution(execution, request, seqBase, this.#events, resumed);
    this.#hot.set(execution.id, hot);
    return hot;
  }

  async get(id: string): Promise<Execution | undefined> {
    const hot = this.#hot.get(id);
    if (hot) return hot.snapshot();
    return this.store.get(id);
  }

  async list(filter: ExecutionFilter): Promise<Execution[]> {
    return (await this.page(filter)).items;
  }

  async page(filter: ExecutionFilter): Promise<ExecutionPage> {
    const page = await this.store.page(filter);
    page.items = page.items.map((e) => {
      const hot = this.#hot.get(e.id);
      return hot ? hot.snapshot() : e;
    });
    return page;
  }

  subscribe(id: string, afterSeq: number, listener: Listener): () => void {
    const hot = this.#hot.get(id);
    if (hot) return hot.stream.subscribe(afterSeq, listener);
    // Finished (or unknown): the whole history is in the store, nothing more will come.
    return replayStored(this.#events, id, afterSeq, listener);
  }

  /** Listeners attached to an execution still running (tests: unsubscribe must not leak). */
  listenerCount(id: string): number {
    return this.#hot.get(id)?.stream.listenerCount ?? 0;
  }

  /**
   * Stops accepting executions, lets running and queued ones (and callback deliveries)
   * finish for up to `timeoutMs`, then aborts the rest: delays and outbound requests are
   * cancelled and those executions fail with "engine shut down". Called again (a second
   * signal, a role's close after a failed start), it answers the first call's promise:
   * what it owns is closed once.
   */
  close(timeoutMs = 10_000): Promise<{ drained: boolean }> {
    this.#closed ??= this.#close(timeoutMs);
    return this.#closed;
  }

  #closed: Promise<{ drained: boolean }> | undefined;

  async #close(timeoutMs: number): Promise<{ drained: boolean }> {
    this.#closing = true;
    this.#releaseResumed();
    // Executions waiting here for a later attempt end now: nothing would run them.
    for (const [id, timer] of this.#waiting) {
      clearTimeout(timer);
      this.#waiting.delete(id);
      const hot = this.#hot.get(id);
      if (!hot) continue;
      void this.#finishFailed(hot, shutDownBeforeNextAttempt(hot));
    }
    const timer = new AbortController();
    const timeout = sleep(timeoutMs, timer.signal).then(
      () => 'timeout' as const,
      () => 'timeout' as const,
    );
    const drained = await this.#settle(timeout);
    timer.abort();
    if (!drained) {
      this.#aborting = true;
      this.#failQueued();
      for (const hot of this.#hot.values()) hot.abort.abort(new Error('engine shut down'));
      this.#deliveries.abort(new Error('engine shut down'));
      await this.#settle();
    }
    await Promise.all(this.#owned.map((o) => o.close()));
    return { drained };
  }

  /**
   * A worker's jobs still waiting for a slot (read ahead, ADR 0049) go back to the queue
   * they came from, unrun: their resume() rejects with HG_ERR_SHUTTING_DOWN, so the job
   * stays unacknowledged and another worker takes it, as one read but not started.
   */
  #releaseResumed(): void {
    for (const hot of this.#queue.remove((h) => h.resumed)) {
      this.#unfinished.set(
        hot,
        new HttpProblem('HG_ERR_SHUTTING_DOWN', 'The engine is shutting down'),
      );
      this.#attemptDue.delete(hot);
      this.#hot.delete(hot.execution.id);
      hot.ended();
    }
  }

  /** Waits until no execution is hot and no delivery pending (or `timeout` wins). */
  async #settle(timeout?: Promise<'timeout'>): Promise<boolean> {
    for (;;) {
      const pending = [...[...this.#hot.values()].map((h) => h.done), ...this.#deliveries.pending];
      if (pending.length === 0) return true;
      const all = Promise.all(pending).then(() => 'done' as const);
      const outcome = await (timeout ? Promise.race([all, timeout]) : all);
      if (outcome === 'timeout') return false;
    }
  }

  #pumpScheduled = false;

  /**
   * Pumps on the next turn (check phase), once for all the starts of this one: a started
   * execution runs after the answers of the requests read in the same poll phase have
   * been written, not between them. An Immediate ACK leaves before its run, and a load of
   * concurrent requests costs the embedded server a fifth less CPU per request
   * (bench/README.md, 2026-11-28 night); a waiting caller has subscribed before the
   * run's first event.
   */
  #pumpSoon(): void {
    if (this.#pumpScheduled) return;
    this.#pumpScheduled = true;
    setImmediate(() => {
      this.#pumpScheduled = false;
      this.#pump();
    });
  }

  /**
   * Aborting, the queued executions end: none will run. Also from the pump: a start that
   * was saving its queued record when the abort began queues it after that.
   */
  #failQueued(): void {
    for (const hot of this.#queue.drain()) {
      void this.#finishFailed(hot, new ExecutionFailure('engine shut down before the run'));
    }
  }

  #pump(): void {
    if (this.#aborting) {
      this.#failQueued();
      return;
    }
    while (this.#running < this.#concurrency && !this.#aborting) {
      // The waiting execution of the namespace holding the fewest slots (ADR 0049).
      const hot = this.#queue.take();
      if (hot === undefined) break;
      this.#running++;
      // Its slot is given back (and the queue pumped) by the run itself.
      void this.#run(hot);
    }
  }

  /**
   * Runs one attempt in the slot the pump gave it, and gives the slot back (here, not in
   * a callback on its promise: no closure per run).
   */
  async #run(hot: LiveExecution): Promise<void> {
    try {
      if (this.#attemptDue.delete(hot)) hot.nextAttempt();
      hot.markRunning();
      // A worker's running record goes with the run's first events where the store can
      // (one call fewer per run); a store that is down then fails the final write, and the
      // job, left unacknowledged, runs again, as below.
      if (hot.resumed && !hot.stream.saveWithFirstEvents()) {
        // A job whose running record cannot be written is not run now: the queue runs it
        // again (a store that is down must not turn a job into a failed execution).
        try {
          await this.store.save(hot.execution);
        } catch (error) {
          this.#events.onInternalError(error, 'saving execution');
          this.#unfinished.set(hot, error);
          this.#hot.delete(hot.execution.id);
          hot.ended();
          return;
        }
      }
      // Tracing off: this branch is all it costs.
      const span = this.#tracing === undefined ? undefined : this.#startSpan(hot);
      try {
        if (!hot.resumed) await this.store.save(hot.execution);
        hot.succeed(await this.#interpreter.execute(hot));
        await this.#persist(hot);
      } catch (error) {
        if (span !== undefined) {
          const failure = hot.failure(error);
          span.fail(failure.message, failure.kind ?? 'internal');
        }
        await this.#attemptFailed(hot, error);
      } finally {
        span?.end();
      }
    } finally {
      this.#running--;
      this.#queue.finished(slotNamespace(hot.request.trigger));
      this.#pump();
    }
  }

  /** The span of this attempt: a child of the span that started the execution. */
  #startSpan(hot: LiveExecution): TraceSpan {
    const execution = hot.execution;
    const span = (this.#tracing as Tracing).execution({
      executionId: execution.id,
      workflowId: execution.workflowId,
      triggerKey: execution.triggerKey,
      attempt: execution.attempt ?? 1,
      parent: execution.trace,
      queued: hot.resumed,
    });
    hot.span = span;
    return span;
  }

  /**
   * An attempt failed: under a retry policy that covers the failure, the execution waits
   * for its next attempt, or (the last attempt) goes to the dead-letter list; otherwise
   * it fails.
   */
  async #attemptFailed(hot: LiveExecution, error: unknown): Promise<void> {
    const policy = hot.request.workflow.spec.retry;
    if (!policy || hot.aborted || this.#aborting) {
      await this.#finishFailed(hot, error);
      return;
    }
    const kind = hot.failure(error).kind ?? 'internal';
    const wait = nextAttempt(policy, kind, hot.execution.attempt ?? 1);
    if (wait !== undefined) {
      await this.#scheduleRetry(hot, error, wait);
    } else if (isRetryable(kind) && resolveRetryPolicy(policy).on.has(kind)) {
      hot.deadLetter(error);
      await this.#persist(hot);
    } else {
      await this.#finishFailed(hot, error);
    }
  }

  async #scheduleRetry(hot: LiveExecution, error: unknown, wait: number): Promise<void> {
    hot.attemptFailed(error, wait);
    this.#observer?.attemptRetried?.(hot.execution);
    const dueAt = Date.now() + wait;
    const id = hot.execution.id;
    if (this.#handOff) {
      // The record and the next attempt go to the shared queue; this engine lets go.
      try {
        await hot.stream.settle();
        await this.#handOff.schedule(hot.execution, hot.request, dueAt);
      } catch (handOffError) {
        this.#unfinished.set(hot, handOffError);
      }
      this.#hot.delete(id);
      hot.ended();
      return;
    }
    if (this.#closing) {
      // Nothing would run the next attempt: close() ended those waiting when it began,
      // and a run failing after that (one that was running, or started since: a start
      // pumps on the next turn) ends the same way, or close() would wait for its timer.
      await this.#finishFailed(hot, shutDownBeforeNextAttempt(hot));
      return;
    }
    try {
      await this.store.save(hot.execution);
    } catch (saveError) {
      this.#events.onInternalError(saveError, 'saving execution');
    }
    const timer = setTimeout(() => {
      this.#waiting.delete(id);
      hot.nextAttempt();
      this.#queue.push(slotNamespace(hot.request.trigger), hot);
      this.#pump();
    }, wait);
    this.#waiting.set(id, timer);
  }

  async #finishFailed(hot: LiveExecution, error: unknown): Promise<void> {
    hot.fail(error);
    await this.#persist(hot);
  }

  /**
   * Keeps a callback's outcome with its execution, saved already: or, delivered for a
   * succeeded execution whose workflow discards such records (ADR 0041), removes the
   * record and events, which stayed until the delivery was over. A delivery that failed
   * keeps them, with its outcome, for whoever looks into it.
   */
  async #recordCallback(
    execution: Execution,
    request: Pick<StartRequest, 'workflow' | 'keepRecord' | 'idempotencyWindowMs'>,
  ): Promise<void> {
    if (
      execution.status !== 'succeeded' ||
      execution.callback?.delivered !== true ||
      !discardsSuccess(request, execution)
    ) {
      await this.store.save(execution);
      return;
    }
    const window = request.idempotencyWindowMs;
    await this.store.discard(execution, [], {
      finished: true,
      ...(window === undefined ? {} : { tombstoneMs: window }),
    });
    this.#observer?.executionDiscarded?.(execution);
  }

  /**
   * Writes the final record and the events (or, for a succeeded execution that discards
   * its record, `discardsSuccess`, and has no callback to deliver, removes them: ADR
   * 0041), then leaves the hot set; sends the callback.
   */
  async #persist(hot: LiveExecution): Promise<void> {
    const url = hot.request.callbackUrl;
    const discard =
      hot.execution.status === 'succeeded' && !url && discardsSuccess(hot.request, hot.execution);
    // A dead-lettered run's job is acknowledged after its entry is added (below).
    const saved = discard
      ? await hot.stream.discard(
          hot.queueEntry,
          hot.request.watched === true,
          hot.request.idempotencyWindowMs,
        )
      : await hot.stream.persist(hot.execution.deadLetteredAt ? undefined : hot.queueEntry);
    if (hot.resumed && !saved) {
      // Not stored: the job stays unacknowledged and runs again; that run counts,
      // calls back and dead-letters.
      this.#unfinished.set(hot, new Error(`execution ${hot.execution.id} not saved`));
      this.#hot.delete(hot.execution.id);
      hot.ended();
      return;
    }
    if (hot.execution.deadLetteredAt) {
      // After the record: a worker that dies in between leaves a record that says
      // dead-lettered, and the one that takes the job again adds the entry (worker.ts).
      try {
        const listed = await this.deadLetters.add(deadLetterOf(hot.execution, url));
        // Its record went between its write and the add (a store far too small for it).
        if (!listed)
          this.#events.onInternalError(
            new Error(
              `execution ${hot.execution.id} is not in the dead-letter list: its record is gone`,
            ),
            'adding to the dead-letter list',
          );
      } catch (error) {
        this.#events.onInternalError(error, 'adding to the dead-letter list');
        this.#unfinished.set(hot, error);
      }
      this.#observer?.deadLettered?.(hot.execution);
    }
    this.#hot.delete(hot.execution.id);
    hot.ended();
    this.#observer?.executionFinished(hot.execution);
    // Counted when the store did it (an embedded run's failed discard leaves what it had).
    if (discard && saved) this.#observer?.executionDiscarded?.(hot.execution);
    if (url) this.#deliveries.deliver(hot.execution, url, hot.request, hot.span);
  }
}

/** How an execution waiting for its next attempt ends when the engine closes. */
function shutDownBeforeNextAttempt(hot: LiveExecution): ExecutionFailure {
  const next = (hot.execution.attempt ?? 1) + 1;
  return new ExecutionFailure(`engine shut down before attempt ${next}`, { kind: 'shutdown' });
}
