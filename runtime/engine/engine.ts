// The in-process workflow engine: a bounded queue that runs Workflow nodes, keeps a
// per-run log and a replayable event stream per execution, and (in Async Callback
// mode) posts the result to the caller's callback URL.
import { randomUUID } from 'node:crypto';
import { HttpProblem, type ErrorCode } from '../errors.ts';
import type { WorkflowNode } from '../../api/v1alpha1/workflow.ts';
import { CallbackSender, type CallbackSenderOptions, type DeliveryResult } from './callbacks.ts';
import { MemoryExecutionStore, type ExecutionStore } from './execution-store.ts';
import { ExpressionCache, type ExpressionLimits } from './expressions.ts';
import { runHttpNode } from './http-node.ts';
import { OutboundGuard, type OutboundGuardOptions } from './outbound/guard.ts';
import type {
  Execution,
  ExecutionEngine,
  ExecutionError,
  ExecutionEvent,
  ExecutionFilter,
  NodeRun,
  SequencedEvent,
  StartRequest,
} from './ports.ts';
import {
  AbortedError,
  backoffDelay,
  errorMessage,
  isoTime,
  parseDuration,
  sleep,
  summarize,
  toJson,
  toJsonSummarized,
} from './util.ts';

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

type Listener = (event: SequencedEvent) => void;

interface Hot {
  execution: Execution;
  request: StartRequest;
  /** Events of this run; their seq continues after `seqBase` (events of earlier runs). */
  events: SequencedEvent[];
  seqBase: number;
  /** streamEvents: events not sent to the store yet (see #stream). */
  unsent: SequencedEvent[];
  /** streamEvents: this run's appends, and whether one of them failed. */
  appends: Promise<void>[];
  appendFailed: boolean;
  listeners: Set<Listener>;
  abort: AbortController;
  done: Promise<void>;
  resolveDone: () => void;
}

/** Ends the execution: a fail node, a stop policy, the step limit, shutdown. */
export class ExecutionFailure extends Error {
  readonly nodeId: string | undefined;
  readonly statusCode: number;
  readonly code: ErrorCode;
  constructor(
    message: string,
    options: { nodeId?: string; statusCode?: number; code?: ErrorCode } = {},
  ) {
    super(message);
    this.name = 'ExecutionFailure';
    this.nodeId = options.nodeId;
    this.statusCode = options.statusCode ?? 500;
    this.code = options.code ?? 'HG_ERR_EXECUTION_FAILED';
  }
}

interface Step {
  output: unknown;
  /** `summarize(output)`, when the node had it at hand (see #runNode). */
  summary?: string;
  /** `output` is a plain JSON copy made by the node (what `toJson` would return). */
  json?: boolean;
  /** Node to go to; undefined: `next`, else the following node in the list. */
  next?: string | undefined;
}

/** Where each node id is in a workflow's node list (ids are unique: a list-map key). */
const nodeIndexes = new WeakMap<readonly WorkflowNode[], Map<string, number>>();

function nodeIndex(nodes: readonly WorkflowNode[]): Map<string, number> {
  let index = nodeIndexes.get(nodes);
  if (!index) {
    index = new Map(nodes.map((node, i) => [node.id, i]));
    nodeIndexes.set(nodes, index);
  }
  return index;
}

interface RunContext {
  hot: Hot;
  scope: string;
  bindings: { trigger: unknown; nodes: Record<string, unknown> };
}

/** JSONata's $boolean semantics. */
export function truthy(value: unknown): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value === 'boolean') return value;
  if (typeof value === 'number') return value !== 0 && !Number.isNaN(value);
  if (typeof value === 'string') return value.length > 0;
  if (Array.isArray(value)) return value.some((v) => truthy(v));
  if (typeof value === 'function') return false;
  if (typeof value === 'object') return Object.keys(value).length > 0;
  return Boolean(value);
}

/**
 * The log line of a node that starts. Without `inputSummary` the input is the trigger
 * record, which nothing else serialises in a run: its summary is made when the line is
 * first read (a getter, which structuredClone and JSON.stringify read like a field; the
 * record does not change), so runs whose log nobody reads never pay for it.
 */
function startedRun(
  node: WorkflowNode,
  startedAt: string,
  input: unknown,
  inputSummary: string | undefined,
  max: number,
): NodeRun {
  const { id: nodeId, type } = node;
  if (inputSummary !== undefined) {
    return { nodeId, type, startedAt, status: 'running', attempts: 0, inputSummary };
  }
  let summary: string | undefined;
  return {
    nodeId,
    type,
    startedAt,
    status: 'running',
    attempts: 0,
    get inputSummary(): string {
      return (summary ??= summarize(input, max));
    },
  };
}

function isTerminal(event: ExecutionEvent): boolean {
  return event.type === 'completed' || event.type === 'failed';
}

export class InProcessEngine implements ExecutionEngine {
  readonly store: ExecutionStore;
  readonly callbacks: CallbackSender;
  readonly expressions: ExpressionCache;
  readonly #hot = new Map<string, Hot>();
  readonly #queue: Hot[] = [];
  readonly #deliveries = new Set<Promise<void>>();
  readonly #deliveryAbort = new AbortController();
  readonly #concurrency: number;
  readonly #maxQueued: number;
  readonly #maxSteps: number;
  readonly #maxDelayMs: number;
  readonly #summaryLength: number;
  readonly #httpBackoffMs: number;
  readonly outbound: OutboundGuard;
  readonly #owned: { close(): Promise<void> }[] = [];
  readonly #newId: () => string;
  readonly #onInternalError: (error: unknown, where: string) => void;
  readonly #observer: EngineObserver | undefined;
  readonly #streamEvents: boolean;
  #running = 0;
  #closing = false;
  #aborting = false;

  constructor(options: InProcessEngineOptions = {}) {
    this.#concurrency = Math.max(1, options.concurrency ?? 64);
    this.#maxQueued = Math.max(0, options.maxQueued ?? 10_000);
    this.#maxSteps = Math.max(1, options.maxSteps ?? 1000);
    this.#maxDelayMs = options.maxDelayMs ?? 15 * 60_000;
    this.#summaryLength = options.summaryLength ?? 1024;
    this.#httpBackoffMs = options.httpBackoffMs ?? 200;
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
    this.#observer = options.observer;
    this.#streamEvents = options.streamEvents ?? false;
    this.#onInternalError =
      options.onInternalError ??
      ((error, where) => console.error(`hookgate engine: ${where}:`, error));
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
    if (this.#hot.has(id)) return this.#snapshot(this.#hot.get(id) as Hot);
    if (this.#queue.length >= this.#maxQueued) {
      throw new HttpProblem('HG_ERR_ENGINE_OVERLOADED', 'Too many executions are waiting');
    }
    const input = { ...request.input, metadata: { ...request.input.metadata, executionId: id } };
    const execution: Execution = {
      id,
      workflowId: request.workflow.workflowId,
      triggerKey: request.route.key,
      status: 'queued',
      createdAt: isoTime(),
      input,
      log: [],
    };
    const hot = this.#admit(execution, { ...request, input }, 0);
    // Saved first: a store may drop events of an execution it does not hold yet, and
    // with streamEvents this one is not written again at the end (see #persist).
    await this.store.save(execution);
    this.#emit(hot, { type: 'queued' }, execution.createdAt);
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
    const hot = this.#admit(fresh, { ...request, input: execution.input }, afterSeq);
    this.#queue.push(hot);
    this.#pump();
    return hot.done;
  }

  #admit(execution: Execution, request: StartRequest, seqBase: number): Hot {
    let resolveDone = (): void => {};
    const done = new Promise<void>((resolve) => (resolveDone = resolve));
    const hot: Hot = {
      execution,
      request,
      events: [],
      seqBase,
      unsent: [],
      appends: [],
      appendFailed: false,
      listeners: new Set(),
      abort: new AbortController(),
      done,
      resolveDone,
    };
    this.#hot.set(execution.id, hot);
    return hot;
  }

  async get(id: string): Promise<Execution | undefined> {
    const hot = this.#hot.get(id);
    if (hot) return this.#snapshot(hot);
    return this.store.get(id);
  }

  async list(filter: ExecutionFilter): Promise<Execution[]> {
    const stored = await this.store.list(filter);
    return stored.map((e) => {
      const hot = this.#hot.get(e.id);
      return hot ? this.#snapshot(hot) : e;
    });
  }

  subscribe(id: string, afterSeq: number, listener: Listener): () => void {
    const hot = this.#hot.get(id);
    if (hot) {
      try {
        for (const event of hot.events) if (event.seq > afterSeq) listener(event);
      } catch (error) {
        this.#onInternalError(error, 'event listener');
        return () => {};
      }
      const terminal = hot.events.at(-1);
      if (terminal && isTerminal(terminal)) return () => {};
      hot.listeners.add(listener);
      return () => hot.listeners.delete(listener);
    }
    // Finished (or unknown): the whole history is in the store, nothing more will come.
    let cancelled = false;
    this.store.events(id, afterSeq).then(
      (events) => {
        try {
          for (const event of events) if (!cancelled) listener(event);
        } catch (error) {
          this.#onInternalError(error, 'event listener');
        }
      },
      (error: unknown) => this.#onInternalError(error, 'reading events'),
    );
    return () => {
      cancelled = true;
    };
  }

  /** Listeners attached to an execution still running (tests: unsubscribe must not leak). */
  listenerCount(id: string): number {
    return this.#hot.get(id)?.listeners.size ?? 0;
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
      this.#deliveryAbort.abort(new Error('engine shut down'));
      await this.#settle();
    }
    await Promise.all(this.#owned.map((o) => o.close()));
    return { drained };
  }

  /** Waits until no execution is hot and no delivery pending (or `timeout` wins). */
  async #settle(timeout?: Promise<'timeout'>): Promise<boolean> {
    for (;;) {
      const pending = [...[...this.#hot.values()].map((h) => h.done), ...this.#deliveries];
      if (pending.length === 0) return true;
      const all = Promise.all(pending).then(() => 'done' as const);
      const outcome = await (timeout ? Promise.race([all, timeout]) : all);
      if (outcome === 'timeout') return false;
    }
  }

  #snapshot(hot: Hot): Execution {
    return structuredClone(hot.execution);
  }

  /**
   * Numbers an event and hands it to the listeners (and, streaming, to the store). The
   * event literal of the caller, always a fresh object, becomes the sequenced event
   * instead of being copied; `at` is the time the caller already stamped its record
   * or log line with.
   */
  #emit(hot: Hot, event: ExecutionEvent, at: string): void {
    const sequenced = event as SequencedEvent;
    sequenced.executionId = hot.execution.id;
    sequenced.seq = hot.seqBase + hot.events.length + 1;
    sequenced.at = at;
    hot.events.push(sequenced);
    if (this.#streamEvents) this.#stream(hot, sequenced);
    // A copy: a listener may unsubscribe or subscribe others while it is called.
    if (hot.listeners.size > 0) {
      for (const listener of [...hot.listeners]) {
        try {
          listener(sequenced);
        } catch (error) {
          hot.listeners.delete(listener);
          this.#onInternalError(error, 'event listener');
        }
      }
    }
    if (isTerminal(event)) hot.listeners.clear();
  }

  /**
   * streamEvents: an append is a store call (a Lua script in Redis) that costs more than
   * the node run that made the event, so the events of one turn of the event loop go in
   * one append; those a gateway waits on (respond, completed, failed) go at once, with
   * whatever came before them.
   */
  #stream(hot: Hot, event: SequencedEvent): void {
    hot.unsent.push(event);
    if (event.type === 'respond' || isTerminal(event)) this.#sendEvents(hot);
    else if (hot.unsent.length === 1) setImmediate(() => this.#sendEvents(hot));
  }

  #sendEvents(hot: Hot): void {
    if (hot.unsent.length === 0) return;
    const events = hot.unsent;
    hot.unsent = [];
    const append = this.store.appendEvents(events).catch((error: unknown) => {
      hot.appendFailed = true;
      this.#onInternalError(error, 'saving an event');
    });
    hot.appends.push(append);
  }

  #pump(): void {
    while (this.#running < this.#concurrency && this.#queue.length > 0 && !this.#aborting) {
      const hot = this.#queue.shift() as Hot;
      this.#running++;
      void this.#run(hot).finally(() => {
        this.#running--;
        this.#pump();
      });
    }
  }

  async #run(hot: Hot): Promise<void> {
    const execution = hot.execution;
    execution.status = 'running';
    execution.startedAt = isoTime();
    try {
      await this.store.save(hot.execution);
      const output = await this.#execute(hot);
      execution.status = 'succeeded';
      execution.output = output;
      execution.finishedAt = isoTime();
      this.#emit(hot, { type: 'completed', output }, execution.finishedAt);
      await this.#persist(hot);
    } catch (error) {
      await this.#finishFailed(hot, error);
    }
  }

  async #finishFailed(hot: Hot, error: unknown): Promise<void> {
    const failure =
      error instanceof ExecutionFailure
        ? error
        : new ExecutionFailure(
            hot.abort.signal.aborted
              ? 'engine shut down'
              : `internal error: ${errorMessage(error)}`,
          );
    const detail: ExecutionError = {
      message: failure.message,
      statusCode: failure.statusCode,
      code: failure.code,
      ...(failure.nodeId ? { nodeId: failure.nodeId } : {}),
    };
    const execution = hot.execution;
    execution.status = 'failed';
    execution.error = detail;
    execution.finishedAt = isoTime();
    this.#emit(hot, { type: 'failed', error: detail }, execution.finishedAt);
    await this.#persist(hot);
  }

  /** Writes the final record and the events, then leaves the hot set; sends the callback. */
  async #persist(hot: Hot): Promise<void> {
    try {
      await this.store.save(hot.execution);
      // Streaming, the events are stored as they come (the terminal one has gone): the
      // whole history is written again (the store skips the events it has) only if an
      // append failed.
      if (this.#streamEvents) await Promise.all(hot.appends);
      if (!this.#streamEvents || hot.appendFailed) await this.store.appendEvents(hot.events);
    } catch (error) {
      this.#onInternalError(error, 'saving execution');
    }
    this.#hot.delete(hot.execution.id);
    hot.resolveDone();
    this.#observer?.executionFinished(hot.execution);
    const url = hot.request.callbackUrl;
    if (url) this.#deliver(hot.execution, url, hot.request);
  }

  #deliver(execution: Execution, url: string, request: StartRequest): void {
    const delivery = this.callbacks
      .deliver(url, execution, { signal: this.#deliveryAbort.signal })
      .then(
        (result) => {
          this.#observer?.callbackDelivered(result);
          if (!result.delivered) {
            this.#onInternalError(
              new Error(`callback to ${url} not delivered: ${result.reason}`),
              `callback ${execution.id} (${request.workflow.workflowId})`,
            );
          }
        },
        (error: unknown) => this.#onInternalError(error, 'callback'),
      )
      .finally(() => this.#deliveries.delete(delivery));
    this.#deliveries.add(delivery);
  }

  async #execute(hot: Hot): Promise<unknown> {
    const { workflow } = hot.request;
    const nodes = workflow.spec.nodes;
    const ctx: RunContext = {
      hot,
      scope: `${workflow.workflowId}@${workflow.generation}`,
      bindings: { trigger: hot.execution.input, nodes: {} },
    };
    // Position of `current`: the following node needs no lookup, only jumps do.
    let position = 0;
    let current: WorkflowNode | undefined = nodes[0];
    let value: unknown = hot.execution.input;
    // summarize(value): a node's output summary is the next node's input summary. None
    // yet for the trigger record (#runNode makes that one when it is read).
    let summary: string | undefined;
    // `value` is a plain JSON copy that nothing else holds (then the workflow output
    // needs no copy of its own): a transform output, passed on as it is or not.
    let json = false;
    let steps = 0;
    while (current) {
      steps++;
      if (steps > this.#maxSteps) {
        throw new ExecutionFailure(
          `step limit reached: ${this.#maxSteps} node runs (a loop?); next node was '${current.id}'`,
          { nodeId: current.id },
        );
      }
      const step = await this.#runNode(ctx, current, value, summary);
      ctx.bindings.nodes[current.id] = step.output;
      json = step.json === true || (json && step.output === value);
      value = step.output;
      summary = step.summary;
      const nextId = step.next ?? current.next;
      if (nextId === undefined) {
        position++;
      } else {
        const at = nodeIndex(nodes).get(nextId);
        if (at === undefined) {
          throw new ExecutionFailure(`node '${current.id}': next node '${nextId}' does not exist`, {
            nodeId: current.id,
          });
        }
        position = at;
      }
      current = nodes[position];
    }
    return this.#finalOutput(ctx, value, json);
  }

  async #finalOutput(ctx: RunContext, last: unknown, lastIsJson: boolean): Promise<unknown> {
    const { workflow, outputValidator } = ctx.hot.request;
    let output = last;
    if (workflow.spec.output) {
      try {
        output = await this.expressions.evaluate(
          ctx.scope,
          workflow.spec.output,
          last,
          ctx.bindings,
        );
      } catch (error) {
        throw new ExecutionFailure(`workflow output: ${errorMessage(error)}`);
      }
    }
    if (workflow.spec.output || !lastIsJson) output = toJson(output);
    if (outputValidator) {
      const verdict = outputValidator(output);
      if (!verdict.ok) {
        throw new ExecutionFailure(
          `output does not match the output schema: ${verdict.errors.join('; ') || 'invalid'}`,
          { code: 'HG_ERR_OUTPUT_SCHEMA' },
        );
      }
    }
    return output;
  }

  /**
   * Runs a node under its error policy and logs it. `inputSummary` is
   * `summarize(input)` when known; the step returned carries `summarize(output)`.
   */
  async #runNode(
    ctx: RunContext,
    node: WorkflowNode,
    input: unknown,
    inputSummary: string | undefined,
  ): Promise<Step> {
    const { hot } = ctx;
    const started = Date.now();
    const run = startedRun(node, isoTime(started), input, inputSummary, this.#summaryLength);
    hot.execution.log.push(run);
    this.#emit(hot, { type: 'node.started', nodeId: node.id, nodeType: node.type }, run.startedAt);
    const policy: { action: string; maxRetries?: number; backoff?: string } = node.onError ?? {
      action: 'stop',
    };
    const maxAttempts = policy.action === 'retry' ? 1 + (policy.maxRetries ?? 3) : 1;
    let lastError: unknown;
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      run.attempts = attempt;
      try {
        const step = await this.#handle(ctx, node, input);
        // Pass-through nodes (if, switch, delay, respond) output their input as it is.
        step.summary ??=
          step.output === input && inputSummary !== undefined
            ? inputSummary
            : summarize(step.output, this.#summaryLength);
        const logged = step.output === undefined ? undefined : step.summary;
        this.#finishRun(hot, run, started, 'succeeded', logged);
        return step;
      } catch (error) {
        if (error instanceof ExecutionFailure || hot.abort.signal.aborted) {
          return this.#stop(hot, run, started, node, error);
        }
        lastError = error;
      }
      if (attempt < maxAttempts) {
        const base = parseDuration(policy.backoff ?? '200ms');
        try {
          await sleep(backoffDelay(base, attempt), hot.abort.signal);
        } catch (error) {
          return this.#stop(hot, run, started, node, error);
        }
      }
    }
    const message = errorMessage(lastError);
    if (policy.action === 'continue') {
      const output = { error: { message, nodeId: node.id } };
      const summary = summarize(output, this.#summaryLength);
      this.#finishRun(hot, run, started, 'failed', summary, message);
      return { output, summary };
    }
    return this.#stop(hot, run, started, node, lastError);
  }

  #stop(hot: Hot, run: NodeRun, started: number, node: WorkflowNode, error: unknown): never {
    const failure =
      error instanceof ExecutionFailure
        ? error
        : error instanceof AbortedError || hot.abort.signal.aborted
          ? new ExecutionFailure(`engine shut down during node '${node.id}'`, { nodeId: node.id })
          : new ExecutionFailure(`node '${node.id}' failed: ${errorMessage(error)}`, {
              nodeId: node.id,
            });
    this.#finishRun(hot, run, started, 'failed', undefined, failure.message);
    throw failure;
  }

  /** `outputSummary`: of the node output, none when the node has no output. */
  #finishRun(
    hot: Hot,
    run: NodeRun,
    started: number,
    status: 'succeeded' | 'failed',
    outputSummary: string | undefined,
    error?: string,
  ): void {
    const finished = Date.now();
    const finishedAt = isoTime(finished);
    run.status = status;
    run.finishedAt = finishedAt;
    run.durationMs = finished - started;
    const event: ExecutionEvent = { type: 'node.finished', nodeId: run.nodeId, status };
    if (outputSummary !== undefined) run.outputSummary = event.outputSummary = outputSummary;
    if (error !== undefined) run.error = event.error = error;
    this.#emit(hot, event, finishedAt);
  }

  #evaluate(ctx: RunContext, source: string, input: unknown): Promise<unknown> {
    return this.expressions.evaluate(ctx.scope, source, input, ctx.bindings);
  }

  async #handle(ctx: RunContext, node: WorkflowNode, input: unknown): Promise<Step> {
    switch (node.type) {
      case 'transform': {
        const value = await this.#evaluate(ctx, node.expression ?? '$', input);
        const { json, summary } = toJsonSummarized(value, this.#summaryLength);
        return { output: json, summary, json: true };
      }
      case 'delay':
        return this.#delay(ctx, node, input);
      case 'if': {
        const condition = truthy(await this.#evaluate(ctx, node.condition ?? 'false', input));
        return { output: input, next: condition ? node.then : node.else };
      }
      case 'switch':
        return this.#switch(ctx, node, input);
      case 'respond':
        return this.#respond(ctx, node, input);
      case 'fail':
        return this.#fail(ctx, node, input);
      case 'http':
        return {
          output: await runHttpNode(node, input, {
            evaluate: (source, value) => this.#evaluate(ctx, source, value),
            signal: ctx.hot.abort.signal,
            guard: this.outbound,
            backoffMs: this.#httpBackoffMs,
          }),
        };
      default: {
        const unknownType: string = (node as { type: string }).type;
        throw new ExecutionFailure(`node '${node.id}': unknown node type '${unknownType}'`, {
          nodeId: node.id,
        });
      }
    }
  }

  async #delay(ctx: RunContext, node: WorkflowNode, input: unknown): Promise<Step> {
    const ms = parseDuration(node.duration ?? '0ms');
    if (ms > this.#maxDelayMs) {
      throw new ExecutionFailure(
        `node '${node.id}': delay ${node.duration} exceeds the limit of ${this.#maxDelayMs} ms`,
        { nodeId: node.id },
      );
    }
    await sleep(ms, ctx.hot.abort.signal);
    return { output: input };
  }

  async #switch(ctx: RunContext, node: WorkflowNode, input: unknown): Promise<Step> {
    for (const branch of node.cases ?? []) {
      if (truthy(await this.#evaluate(ctx, branch.condition, input))) {
        return { output: input, next: branch.next };
      }
    }
    return { output: input, next: node.default };
  }

  async #respond(ctx: RunContext, node: WorkflowNode, input: unknown): Promise<Step> {
    const body = toJson(
      node.expression ? await this.#evaluate(ctx, node.expression, input) : input,
    );
    const { execution } = ctx.hot;
    if (!execution.response) {
      execution.response = {
        statusCode: node.statusCode ?? 200,
        headers: { ...(node.headers ?? {}) },
        body,
      };
      this.#emit(
        ctx.hot,
        { type: 'respond', response: structuredClone(execution.response) },
        isoTime(),
      );
    }
    return { output: input };
  }

  async #fail(ctx: RunContext, node: WorkflowNode, input: unknown): Promise<never> {
    let message = `workflow failed at node '${node.id}'`;
    if (node.expression) {
      try {
        const value = await this.#evaluate(ctx, node.expression, input);
        message = typeof value === 'string' ? value : summarize(toJson(value));
      } catch (error) {
        message = `${message} (message expression failed: ${errorMessage(error)})`;
      }
    }
    throw new ExecutionFailure(message, { nodeId: node.id, statusCode: node.statusCode ?? 500 });
  }
}
