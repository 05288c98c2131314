// JSONata evaluations in a pool of worker processes (ADR 0048): each worker's heap is
// bounded, and each evaluation has a hard deadline. JSONata's own time limit is checked
// between evaluation steps only, and one step can allocate without bound
// (`$pad("", 4e8)`: 800 MB) or hold the thread: in the engine's process that is every
// namespace's executions; here a worker past its memory or past the deadline is ended
// and replaced, and only that evaluation fails. One evaluation at a time per worker;
// calls wait in order for a free one.
//
// What goes to a worker (amended 2026-11-28 (night)): the bindings the expression names
// and the parts of its input it reads (expression-needs.ts); and the execution's
// trigger record, when the expression reads `$trigger` or all of a `$` that is the
// record, once per execution and worker (an ExecutionContext, held there until the
// execution ends or the worker's byte bound evicts it: expression-contexts.ts). The
// result comes back by structured clone.
import { fork, type ChildProcess } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { WorkerContexts, type ContextChange } from './expression-contexts.ts';
import { ExpressionError, ExpressionLimitError } from './expression-error.ts';
import { withSharedValues, type SharedRef } from './expression-sharing.ts';
import {
  EVERYTHING,
  namedBindings,
  projection,
  type ExpressionNeeds,
  type InputFields,
} from './expression-needs.ts';

/** An execution's trigger record as `$` and/or `$trigger` of a call, held by the worker. */
export interface CallContext {
  key: number;
  /**
   * The record as JSON, when the worker does not hold it yet; `keep`: hold it for the
   * calls that follow (false: over the worker's bound, used for this call only). JSON,
   * not structured clone: a trigger record is JSON (parsed from the request, or read
   * back from the store as JSON), and V8's serializer took 9 times as long for one of
   * 64 KB (1.2 ms against 0.14 here).
   */
  record?: { json: string; keep: boolean };
  asInput: boolean;
  asTrigger: boolean;
}

/** One evaluation, as the worker gets it. */
export interface EvaluationCall {
  id: number;
  source: string;
  /** `$`, unless the context's record is (`context.asInput`). */
  input: unknown;
  /** The bindings the expression names; `trigger` is the context's record when `context.asTrigger`. */
  bindings: Record<string, unknown>;
  context?: CallContext;
  /** Contexts the worker lets go of first (ended executions, evicted ones). */
  drop?: number[];
  timeoutMs: number;
  maxDepth: number;
  /** Largest result passed back, in bytes of its serialization. */
  maxResultBytes: number;
}

/** Contexts the worker lets go of, sent alone when it is idle. */
export interface DropMessage {
  drop: number[];
}

export type WorkerMessage = EvaluationCall | DropMessage;

/**
 * The worker's answer: the value (`refs`: where values of its input or bindings go back
 * in), or JSONata's error as data; `held`, the contexts it holds after the call (what the
 * pool's account should say, for tests).
 */
export type EvaluationAnswer =
  | { id: number; held?: number; value: unknown; refs?: SharedRef[] }
  | {
      id: number;
      held?: number;
      error: { message: string; code?: string; position?: number };
    };

/** One execution's trigger record, sent to a worker once (ExpressionWorkerPool.openContext). */
export interface ExecutionContext {
  readonly key: number;
  readonly record: unknown;
}

/** One evaluation, as the pool is asked for it. */
export interface EvaluationRequest {
  source: string;
  input: unknown;
  bindings: Record<string, unknown>;
  /** What the expression reads of its bindings and input (default: all of them). */
  needs?: ExpressionNeeds;
  /** Its execution's context: `$` or `$trigger`, when they are its record, are sent once. */
  context?: ExecutionContext;
}

/**
 * What runs the evaluations: `thread` (worker threads; Node's heap limit there is
 * best-effort: some allocations abort the whole process, nodejs/node#47224) or `process`
 * (child processes: a heap past its limit ends that process only).
 */
export type PoolTransport = 'thread' | 'process';

export interface ExpressionPoolOptions {
  /** Default `process` (ADR 0048). */
  transport?: PoolTransport;
  /** Worker threads, default os.availableParallelism(). */
  size?: number;
  /** Each worker's old-generation heap, MB (default 64). */
  maxOldGenerationSizeMb?: number;
  /** Each worker's young-generation heap, MB (default 16). */
  maxYoungGenerationSizeMb?: number;
  /**
   * Largest result an evaluation may give, MB as structured clone carries it, roughly (default 16): a
   * bigger one fails as past the memory limit rather than land in the engine's heap.
   */
  maxResultMb?: number;
  /**
   * Added to an expression's time limit for the hard deadline, ms (default 100): JSONata's
   * own check ends a slow evaluation at the limit between steps; the deadline ends one
   * that a single step holds past it.
   */
  graceMs?: number;
  /**
   * Execution contexts a worker holds, MB of their records as JSON (default an eighth of
   * the old-generation heap: a record takes about twice its JSON's size there).
   */
  maxContextMb?: number;
}

interface Pending {
  call: EvaluationCall;
  /** The call reads its execution's record (as `$`, `$trigger` or both). */
  context: ExecutionContext | undefined;
  /** What it reads of its input. */
  fields: InputFields | 'all';
  /** Its input and bindings as given: what the result's references point into. */
  input: unknown;
  bindings: Record<string, unknown>;
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
}

/** A worker thread or a child process, as the pool talks to it. */
interface Channel {
  post(message: WorkerMessage): void;
  ref(): void;
  unref(): void;
  /** Ends it now; its exit follows. */
  kill(): Promise<void>;
}

interface Slot {
  worker: Channel;
  /** Its worker has loaded (a deadline counts from the call, not from the start). */
  ready: boolean;
  busy: Pending | undefined;
  timer: NodeJS.Timeout | undefined;
  /** Why the worker is being ended, told to the evaluation it was running. */
  ending: Error | undefined;
  /** The execution contexts its worker holds. */
  contexts: WorkerContexts;
  /** How many its worker said it held, after its last call. */
  reported: number | undefined;
  /** Records sent to its worker. */
  sent: number;
}

/** A slot's execution contexts: the pool's account and the worker's own (tests). */
export interface ContextCount {
  held: number;
  bytes: number;
  /** What the worker said after its last call (drops sent since are not in it). */
  reported: number | undefined;
  /** Records sent to the worker (kept or not). */
  sent: number;
}

const WORKER_URL = new URL('./expression-worker.ts', import.meta.url);

/** The expression as an error message quotes it. */
function quoted(source: string): string {
  const flat = source.replace(/\s+/g, ' ');
  return JSON.stringify(flat.length > 80 ? `${flat.slice(0, 79)}…` : flat);
}

export class ExpressionWorkerPool {
  readonly size: number;
  readonly #transport: PoolTransport;
  readonly #oldMb: number;
  readonly #youngMb: number;
  readonly #graceMs: number;
  readonly #maxResultBytes: number;
  readonly #maxContextBytes: number;
  /** Started lazily: a process whose expressions all take the fast path starts none. */
  readonly #slots: (Slot | undefined)[];
  readonly #queue: Pending[] = [];
  #nextId = 1;
  #nextContext = 1;
  #closed = false;

  constructor(options: ExpressionPoolOptions = {}) {
    this.size = Math.max(1, options.size ?? availableParallelism());
    this.#transport = options.transport ?? 'process';
    this.#oldMb = options.maxOldGenerationSizeMb ?? 64;
    this.#youngMb = options.maxYoungGenerationSizeMb ?? 16;
    this.#graceMs = options.graceMs ?? 100;
    this.#maxResultBytes = (options.maxResultMb ?? 16) * 1024 * 1024;
    this.#maxContextBytes = (options.maxContextMb ?? this.#oldMb / 8) * 1024 * 1024;
    this.#slots = Array.from({ length: this.size }, () => undefined);
  }

  evaluate(
    request: EvaluationRequest,
    limits: { timeoutMs: number; maxDepth: number },
  ): Promise<unknown> {
    if (this.#closed) return Promise.reject(new ExpressionError('expression pool closed'));
    const { source, input, context } = request;
    const needs = request.needs ?? EVERYTHING;
    const bindings = namedBindings(request.bindings, needs);
    const call: EvaluationCall = {
      id: this.#nextId++,
      source,
      input,
      bindings,
      maxResultBytes: this.#maxResultBytes,
      ...limits,
    };
    let reads: ExecutionContext | undefined;
    // A record is an object (one that is not goes as any value would).
    const held =
      typeof context?.record === 'object' && context.record !== null ? context : undefined;
    const asInput = held !== undefined && input === held.record;
    if (held) {
      // The record goes once per worker: the call carries its key in place of it.
      const asTrigger = Object.hasOwn(bindings, 'trigger') && bindings.trigger === held.record;
      if (asInput) call.input = undefined;
      if (asTrigger) delete bindings.trigger;
      if (asInput || asTrigger) {
        call.context = { key: held.key, asInput, asTrigger };
        reads = held;
      }
    }
    if (!asInput && needs.input !== 'all') call.input = projection(input, needs.input);
    return new Promise((resolve, reject) => {
      this.#queue.push({
        call,
        context: reads,
        fields: needs.input,
        input,
        bindings: request.bindings,
        resolve,
        reject,
      });
      this.#pump();
    });
  }

  /** A context for one execution's calls (`record`: its trigger record); end it with closeContext. */
  openContext(record: unknown): ExecutionContext {
    return { key: this.#nextContext++, record };
  }

  /** The execution ended: its workers let go of its record (told now if idle, else with the next call). */
  closeContext(context: ExecutionContext): void {
    for (const slot of this.#slots) {
      if (!slot?.contexts.end(context.key)) continue;
      if (slot.ready && slot.busy === undefined) this.#sendDrops(slot);
    }
  }

  /** Each started worker's execution contexts (tests). */
  contextCounts(): ContextCount[] {
    return this.#slots
      .filter((slot): slot is Slot => slot !== undefined)
      .map((slot) => ({
        held: slot.contexts.size,
        bytes: slot.contexts.bytes,
        reported: slot.reported,
        sent: slot.sent,
      }));
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const pending of this.#queue.splice(0)) {
      pending.reject(new ExpressionError('expression pool closed'));
    }
    const ending: Promise<void>[] = [];
    for (const [i, slot] of this.#slots.entries()) {
      if (!slot) continue;
      this.#slots[i] = undefined;
      clearTimeout(slot.timer);
      slot.busy?.reject(new ExpressionError('expression pool closed'));
      slot.busy = undefined;
      ending.push(slot.worker.kill());
    }
    await Promise.all(ending);
  }

  #pump(): void {
    while (this.#queue.length > 0) {
      const idle = this.#idleFor(this.#queue[0] as Pending);
      if (idle) {
        this.#dispatch(idle, this.#queue.shift() as Pending);
        continue;
      }
      // Another worker for each call that no starting one will take (up to the size).
      const starting = this.#slots.filter((s) => s !== undefined && !s.ready).length;
      const free = this.#slots.indexOf(undefined);
      if (this.#queue.length <= starting || free < 0) return;
      this.#start(free);
    }
  }

  /** An idle worker for `pending`: one that holds its context if one does. */
  #idleFor(pending: Pending): Slot | undefined {
    let idle: Slot | undefined;
    for (const slot of this.#slots) {
      if (slot?.ready !== true || slot.busy !== undefined) continue;
      if (pending.context === undefined) return slot;
      if (slot.contexts.use(pending.context.key)) return slot;
      idle ??= slot;
    }
    return idle;
  }

  #dispatch(slot: Slot, pending: Pending): void {
    let call: EvaluationCall;
    let change: ContextChange;
    try {
      ({ call, change } = this.#withContext(slot, pending));
      slot.worker.post(call);
    } catch (error) {
      // DataCloneError: a function or a symbol in the input or the bindings.
      const reason = error instanceof Error ? error.message : String(error);
      pending.reject(
        new ExpressionError(`expression failed: its input cannot be passed (${reason})`),
      );
      return;
    }
    slot.contexts.sent(change);
    if (call.context?.record) slot.sent++;
    slot.busy = pending;
    slot.worker.ref();
    slot.timer = setTimeout(() => {
      // The worker is ended: nothing more goes to it, its answer (if one is on its way)
      // is not waited for.
      slot.busy = undefined;
      this.#retire(slot);
      pending.reject(
        new ExpressionLimitError(
          `expression ${quoted(call.source)} exceeded its time limit of ${call.timeoutMs} ms`,
          'time',
        ),
      );
      void slot.worker.kill();
      this.#pump();
    }, call.timeoutMs + this.#graceMs);
  }

  /**
   * The call as it goes to `slot`'s worker: with its execution's record when the worker
   * does not hold it yet (as JSON: its length is what the bound counts), unless the
   * call reads only part of it as `$` (then that part goes, and the record stays out);
   * and the contexts the worker lets go of first. Throws when the record cannot be
   * written as JSON (a BigInt).
   */
  #withContext(slot: Slot, pending: Pending): { call: EvaluationCall; change: ContextChange } {
    const { call, context, fields } = pending;
    let change = slot.contexts.dropping();
    const ref = call.context;
    if (context && ref && !slot.contexts.use(context.key)) {
      if (fields !== 'all' && !ref.asTrigger) {
        call.input = projection(context.record, fields);
        delete call.context;
      } else {
        const json = JSON.stringify(context.record);
        change = slot.contexts.keeping(context.key, json.length);
        ref.record = { json, keep: change.keep !== undefined };
      }
    }
    if (change.drop.length > 0) call.drop = change.drop;
    return { call, change };
  }

  /** Tells an idle worker which contexts it lets go of. */
  #sendDrops(slot: Slot): void {
    const change = slot.contexts.dropping();
    if (change.drop.length === 0) return;
    slot.worker.post({ drop: change.drop });
    slot.contexts.sent(change);
  }

  /** Frees the slot of a worker that is ending: a new one is started when needed. */
  #retire(slot: Slot): void {
    const index = this.#slots.indexOf(slot);
    if (index >= 0) this.#slots[index] = undefined;
  }

  #start(index: number): Slot {
    const events: ChannelEvents = {
      message: (answer) => this.#answered(slot, answer),
      failed: (outOfMemory, message) => {
        slot.ending ??= outOfMemory
          ? new ExpressionLimitError(
              `expression ${quoted(slot.busy?.call.source ?? '')} exceeded its memory limit (${this.#oldMb} MB)`,
              'memory',
            )
          : new ExpressionError(`expression failed: its worker failed: ${message}`);
      },
      ready: () => {
        slot.ready = true;
        slot.worker.unref();
        this.#pump();
      },
      exit: () => {
        clearTimeout(slot.timer);
        if (!slot.ready) {
          // It could not load: every call waiting fails rather than start one after another.
          for (const waiting of this.#queue.splice(0)) {
            waiting.reject(new ExpressionError('expression failed: its worker did not start'));
          }
        }
        const pending = slot.busy;
        slot.busy = undefined;
        pending?.reject(
          slot.ending ?? new ExpressionError('expression failed: its worker stopped'),
        );
        this.#retire(slot);
        if (!this.#closed) this.#pump();
      },
    };
    const limits = { oldMb: this.#oldMb, youngMb: this.#youngMb };
    const worker =
      this.#transport === 'thread' ? threadChannel(limits, events) : processChannel(limits, events);
    const slot: Slot = {
      worker,
      ready: false,
      busy: undefined,
      timer: undefined,
      ending: undefined,
      contexts: new WorkerContexts(this.#maxContextBytes),
      reported: undefined,
      sent: 0,
    };
    this.#slots[index] = slot;
    worker.ref();
    return slot;
  }

  #answered(slot: Slot, answer: EvaluationAnswer): void {
    const pending = slot.busy;
    if (!pending || pending.call.id !== answer.id) return;
    clearTimeout(slot.timer);
    slot.busy = undefined;
    slot.reported = answer.held;
    slot.worker.unref();
    if ('error' in answer && answer.error.code === 'HG_EXPRESSION_RESULT') {
      pending.reject(
        new ExpressionLimitError(
          `expression ${quoted(pending.call.source)} exceeded its memory limit (result over ${this.#maxResultBytes / 1048576} MB)`,
          'memory',
        ),
      );
    } else if ('error' in answer) {
      const { message, code, position } = answer.error;
      const at = position === undefined ? '' : ` at position ${position}`;
      pending.reject(
        new ExpressionError(`expression failed: ${message}${code ? ` (${code}${at})` : ''}`, code),
      );
    } else if (answer.refs) {
      // The values it shares with the input and bindings: this process' own.
      const root = (name: string): unknown =>
        name === '$' ? pending.input : pending.bindings[name];
      pending.resolve(withSharedValues(answer.value, answer.refs, root));
    } else {
      pending.resolve(answer.value);
    }
    this.#pump();
    // Idle now: ended executions' contexts are let go of at once.
    if (slot.busy === undefined && slot.contexts.pendingDrops > 0) this.#sendDrops(slot);
  }
}

interface ChannelEvents {
  message: (answer: EvaluationAnswer) => void;
  /** It has loaded and takes calls. */
  ready: () => void;
  /** Before its exit: out of memory, or another failure. */
  failed: (outOfMemory: boolean, message: string) => void;
  exit: () => void;
}

function threadChannel(limits: { oldMb: number; youngMb: number }, on: ChannelEvents): Channel {
  const worker = new Worker(WORKER_URL, {
    resourceLimits: {
      maxOldGenerationSizeMb: limits.oldMb,
      maxYoungGenerationSizeMb: limits.youngMb,
    },
  });
  worker.unref();
  worker.on('message', (message: EvaluationAnswer | 'ready') =>
    message === 'ready' ? on.ready() : on.message(message),
  );
  worker.on('error', (error: Error & { code?: string }) =>
    on.failed(error.code === 'ERR_WORKER_OUT_OF_MEMORY', error.message),
  );
  worker.on('exit', on.exit);
  return {
    post: (message) => worker.postMessage(message),
    ref: () => worker.ref(),
    unref: () => worker.unref(),
    kill: () => worker.terminate().then(() => undefined),
  };
}

function processChannel(limits: { oldMb: number; youngMb: number }, on: ChannelEvents): Channel {
  // The young generation is two semi-spaces and a third as much again (V8's sizing).
  const semiMb = Math.max(1, Math.floor((limits.youngMb * 3) / 8));
  const child: ChildProcess = fork(WORKER_URL, [], {
    serialization: 'advanced',
    execArgv: [`--max-old-space-size=${limits.oldMb}`, `--max-semi-space-size=${semiMb}`],
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  // V8's report of a heap past its limit, on stderr before the abort.
  let stderr = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => {
    if (stderr.length < 4096) stderr += chunk;
  });
  const unref = (): void => {
    child.unref();
    child.channel?.unref();
  };
  unref();
  child.on('message', (message: EvaluationAnswer | 'ready') =>
    message === 'ready' ? on.ready() : on.message(message),
  );
  child.on('error', (error) => on.failed(false, error.message));
  let exited = false;
  child.on('exit', (code, signal) => {
    exited = true;
    if (signal !== 'SIGKILL' && code !== 0) {
      const outOfMemory = /heap out of memory|heap limit|Allocation failed/i.test(stderr);
      on.failed(outOfMemory, `exit ${code ?? signal}`);
    }
    on.exit();
  });
  return {
    post: (message) => {
      child.send(message);
    },
    ref: () => {
      child.ref();
      child.channel?.ref();
    },
    unref,
    kill: () =>
      new Promise<void>((resolve) => {
        if (exited) return resolve();
        child.once('exit', () => resolve());
        child.ref();
        child.kill('SIGKILL');
      }),
  };
}
