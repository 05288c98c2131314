// The in-process workflow engine: a bounded queue of executions run a few at a time
// (live-execution.ts: one execution's record and events while it is here), each by the
// interpreter (interpreter.ts, nodes/), and in Async Callback mode a callback once it
// has finished (callback-deliveries.ts).
import { randomUUID } from 'node:crypto';
import { HttpProblem } from '../errors.ts';
import { CallbackDeliveries } from './callback-deliveries.ts';
import { CallbackSender, type CallbackSenderOptions, type DeliveryResult } from './callbacks.ts';
import { replayStored, type EventOutlet, type Listener } from './execution-events.ts';
import { ExecutionFailure } from './execution-failure.ts';
import { MemoryExecutionStore, type ExecutionStore } from './execution-store.ts';
import { ExpressionCache, type ExpressionLimits } from './expressions.ts';
import { Interpreter } from './interpreter.ts';
import { LiveExecution } from './live-execution.ts';
import { OutboundGuard, type OutboundGuardOptions } from './outbound/guard.ts';
import type { Execution, ExecutionEngine, ExecutionFilter, StartRequest } from './ports.ts';
import { isoTime } from '../time.ts';
import { sleep } from './util.ts';

export { ExecutionFailure } from './execution-failure.ts';

export interface InProcessEngineOptions {
  /** Executions running at once; the rest wait in the queue. Default 64. */
  concurrency?: number;
  /** Executions waiting at most; start() then rejects with HG_ERR_ENGINE_OVERLOADED. Default 10 000. */
  maxQueued?: number;
  /** Node runs per execution before it fails as a probable loop. Default 1000. */
  maxSteps?: number;
  /** Longest delay node allowed. Default 15 min. */
  maxDelayMs?: number;
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
  /** Execution ids when the trigger output carries none. Default `exec_<uuid>`. */
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
}

export interface EngineObserver {
  executionFinished(execution: Execution): void;
  callbackDelivered(result: DeliveryResult): void;
}

export class InProcessEngine implements ExecutionEngine {
  readonly store: ExecutionStore;
  readonly callbacks: CallbackSender;
  readonly expressions: ExpressionCache;
  readonly outbound: OutboundGuard;
  /** Executions queued or running here. */
  readonly #hot = new Map<string, LiveExecution>();
  readonly #queue: LiveExecution[] = [];
  readonly #deliveries: CallbackDeliveries;
  readonly #interpreter: Interpreter;
  readonly #events: EventOutlet;
  readonly #concurrency: number;
  readonly #maxQueued: number;
  readonly #owned: { close(): Promise<void> }[] = [];
  readonly #newId: () => string;
  readonly #observer: EngineObserver | undefined;
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
    this.store = options.store ?? new MemoryExecutionStore();
    if (options.callbacks instanceof CallbackSender) {
      this.callbacks = options.callbacks;
    } else {
      const callbackOptions = options.callbacks ?? {};
      this.callbacks = new CallbackSender({ guard: this.outbound, ...callbackOptions });
      if (callbackOptions.guard) this.#owned.push(this.callbacks);
    }
    this.expressions = new ExpressionCache(options.expressions);
    this.#newId = options.newId ?? (() => `exec_${randomUUID()}`);
    const { observer } = options;
    this.#observer = observer;
    const onInternalError =
      options.onInternalError ??
      ((error: unknown, where: string) => console.error(`hookgate engine: ${where}:`, error));
    this.#interpreter = new Interpreter({
      expressions: this.expressions,
      outbound: this.outbound,
      maxSteps: Math.max(1, options.maxSteps ?? 1000),
      maxDelayMs: options.maxDelayMs ?? 15 * 60_000,
      summaryLength: options.summaryLength ?? 1024,
      httpBackoffMs: options.httpBackoffMs ?? 200,
    });
    this.#events = {
      store: this.store,
      streamEvents: options.streamEvents ?? false,
      onInternalError,
    };
    this.#deliveries = new CallbackDeliveries({
      sender: this.callbacks,
      ...(observer ? { delivered: (result) => observer.callbackDelivered(result) } : {}),
      onInternalError,
    });
  }

  /** Executions running now. */
  get running(): number {
    return this.#running;
  }

  /** Executions waiting for a slot. */
  get queued(): number {
    return this.#queue.length;
  }

  async start(request: StartRequest): Promise<Execution> {
    if (this.#closing) throw new HttpProblem('HG_ERR_SHUTTING_DOWN', 'The engine is shutting down');
    const id = request.input.metadata.executionId || this.#newId();
    const existing = await this.get(id);
    if (existing) return existing;
    const live = this.#hot.get(id);
    if (live) return live.snapshot();
    if (this.#queue.length >= this.#maxQueued) {
      throw new HttpProblem('HG_ERR_ENGINE_OVERLOADED', 'Too many executions are waiting');
    }
    const input = { ...request.input, metadata: { ...request.input.metadata, executionId: id } };
    const execution: Execution = {
      id,
      workflowId: request.workflow.workflowId,
      triggerKey: request.trigger.key,
      status: 'queued',
      createdAt: isoTime(),
      input,
      log: [],
    };
    if (request.accessDigest) execution.accessDigest = request.accessDigest;
    const hot = this.#admit(execution, { ...request, input }, 0);
    // Saved first: a store may drop events of an execution it does not hold yet, and
    // with streamEvents this one is not written again at the end (see EventStream).
    await this.store.save(execution);
    hot.stream.emit({ type: 'queued' }, execution.createdAt);
    // What the caller needs now (id, status, times), before the run starts changing it.
    const queued = { ...execution, log: [] };
    this.#queue.push(hot);
    this.#pump();
    return queued;
  }

  /**
   * Runs an execution whose queued record already exists elsewhere (a worker taking a
   * job off the queue, or running it again after another worker died). The record
   * restarts from `queued` with an empty log; event numbering continues after
   * `afterSeq`, the events already stored. Resolves once the run has finished and its
   * record is saved.
   */
  resume(request: StartRequest, execution: Execution, afterSeq: number): Promise<void> {
    if (this.#closing) {
      return Promise.reject(new HttpProblem('HG_ERR_SHUTTING_DOWN', 'The engine is shutting down'));
    }
    const running = this.#hot.get(execution.id);
    if (running) return running.done;
    const fresh: Execution = {
      id: execution.id,
      workflowId: execution.workflowId,
      triggerKey: execution.triggerKey,
      status: 'queued',
      createdAt: execution.createdAt,
      input: execution.input,
      log: [],
    };
    // The caller's link stays valid when a worker runs the queued record.
    if (execution.accessDigest) fresh.accessDigest = execution.accessDigest;
    const hot = this.#admit(fresh, { ...request, input: execution.input }, afterSeq);
    this.#queue.push(hot);
    this.#pump();
    return hot.done;
  }

  #admit(execution: Execution, request: StartRequest, seqBase: number): LiveExecution {
    const hot = new LiveExecution(execution, request, seqBase, this.#events);
    this.#hot.set(execution.id, hot);
    return hot;
  }

  async get(id: string): Promise<Execution | undefined> {
    const hot = this.#hot.get(id);
    if (hot) return hot.snapshot();
    return this.store.get(id);
  }

  async list(filter: ExecutionFilter): Promise<Execution[]> {
    const stored = await this.store.list(filter);
    return stored.map((e) => {
      const hot = this.#hot.get(e.id);
      return hot ? hot.snapshot() : e;
    });
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
   * cancelled and those executions fail with "engine shut down".
   */
  async close(timeoutMs = 10_000): Promise<{ drained: boolean }> {
    this.#closing = true;
    const timer = new AbortController();
    const timeout = sleep(timeoutMs, timer.signal).then(
      () => 'timeout' as const,
      () => 'timeout' as const,
    );
    const drained = await this.#settle(timeout);
    timer.abort();
    if (!drained) {
      this.#aborting = true;
      for (const hot of this.#queue.splice(0)) {
        void this.#finishFailed(hot, new ExecutionFailure('engine shut down before the run'));
      }
      for (const hot of this.#hot.values()) hot.abort.abort(new Error('engine shut down'));
      this.#deliveries.abort(new Error('engine shut down'));
      await this.#settle();
    }
    await Promise.all(this.#owned.map((o) => o.close()));
    return { drained };
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

  #pump(): void {
    while (this.#running < this.#concurrency && this.#queue.length > 0 && !this.#aborting) {
      const hot = this.#queue.shift() as LiveExecution;
      this.#running++;
      void this.#run(hot).finally(() => {
        this.#running--;
        this.#pump();
      });
    }
  }

  async #run(hot: LiveExecution): Promise<void> {
    hot.markRunning();
    try {
      await this.store.save(hot.execution);
      hot.succeed(await this.#interpreter.execute(hot));
      await this.#persist(hot);
    } catch (error) {
      await this.#finishFailed(hot, error);
    }
  }

  async #finishFailed(hot: LiveExecution, error: unknown): Promise<void> {
    hot.fail(error);
    await this.#persist(hot);
  }

  /** Writes the final record and the events, then leaves the hot set; sends the callback. */
  async #persist(hot: LiveExecution): Promise<void> {
    await hot.stream.persist();
    this.#hot.delete(hot.execution.id);
    hot.ended();
    this.#observer?.executionFinished(hot.execution);
    const url = hot.request.callbackUrl;
    if (url) this.#deliveries.deliver(hot.execution, url);
  }
}
