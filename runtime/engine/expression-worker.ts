// The worker of expression-pool.ts, a worker thread or a child process: evaluates one JSONata expression at a time,
// with the engine's limits (time, depth) and the linear-time regular expressions
// (../../api/linear-regex.ts sets V8's flag in this isolate too when it loads). The
// worker's heap is bounded by its resourceLimits: an evaluation that allocates past
// them ends this thread, not the engine's process; one that holds a step past the time
// limit is terminated by the pool. It holds the trigger records of the executions the
// pool says (by context key), and lets go of them when the pool says. What its result
// shares with its input and bindings goes back as references (expression-sharing.ts).
import { parentPort } from 'node:worker_threads';
import jsonata from 'jsonata';
import { LinearRegExp } from '../../api/linear-regex.ts';
import type { EvaluationAnswer, EvaluationCall, WorkerMessage } from './expression-pool.ts';
import {
  indexOf,
  withSharedRefs,
  type SharedSources,
  type ValueIndex,
} from './expression-sharing.ts';

/** A trigger record held, and the index of its objects (made when a result is first matched). */
interface Held {
  record: unknown;
  index?: ValueIndex;
}

/** Trigger records by execution context key (expression-contexts.ts keeps the account). */
const records = new Map<number, Held>();

/** Compiled expressions by source, the most recent last (bounded: a worker is long-lived). */
const compiled = new Map<string, jsonata.Expression>();
const MAX_COMPILED = 1024;

function compiledOf(call: EvaluationCall): jsonata.Expression {
  const key = `${call.timeoutMs}/${call.maxDepth}/${call.source}`;
  let expression = compiled.get(key);
  if (expression) {
    compiled.delete(key);
  } else {
    expression = jsonata(call.source, {
      timeout: call.timeoutMs,
      stack: call.maxDepth,
      RegexEngine: LinearRegExp,
    });
    if (compiled.size >= MAX_COMPILED) {
      const oldest = compiled.keys().next().value;
      if (oldest !== undefined) compiled.delete(oldest);
    }
  }
  compiled.set(key, expression);
  return expression;
}

/** JSONata throws plain objects `{ code, message, position }`; Errors pass as messages. */
function failure(id: number, error: unknown): EvaluationAnswer {
  if (typeof error === 'object' && error !== null) {
    const e = error as { code?: unknown; message?: unknown; position?: unknown };
    return {
      id,
      held: records.size,
      error: {
        message: typeof e.message === 'string' ? e.message : 'unknown error',
        ...(typeof e.code === 'string' ? { code: e.code } : {}),
        ...(typeof e.position === 'number' ? { position: e.position } : {}),
      },
    };
  }
  return { id, held: records.size, error: { message: String(error) } };
}

interface Arguments {
  input: unknown;
  bindings: Record<string, unknown>;
  /** What a result may share with: `$` and the bindings. */
  sources: SharedSources;
}

/** The call's input and bindings, its execution's record put in where the pool left it out. */
function argumentsOf(call: EvaluationCall): Arguments {
  const { context } = call;
  let held: Held | undefined;
  if (context?.record) {
    held = { record: JSON.parse(context.record.json) as unknown };
    if (context.record.keep) records.set(context.key, held);
  } else if (context) {
    held = records.get(context.key);
    // The pool's account says this worker holds it: a bug, not the expression's fault.
    if (!held) throw new Error(`execution context ${context.key} is not held by this worker`);
  }
  const input = context?.asInput ? held?.record : call.input;
  const bindings = context?.asTrigger ? { ...call.bindings, trigger: held?.record } : call.bindings;
  const indexes = new Map<string, ValueIndex>();
  const index = (root: string): ValueIndex | undefined => {
    const isRecord = root === '$' ? context?.asInput : root === 'trigger' && context?.asTrigger;
    if (isRecord && held) return (held.index ??= indexOf(held.record));
    let made = indexes.get(root);
    if (!made) {
      made = indexOf(root === '$' ? input : bindings[root]);
      indexes.set(root, made);
    }
    return made;
  };
  return { input, bindings, sources: { roots: ['$', ...Object.keys(bindings)], index } };
}

/** A value structured clone cannot carry (a function in the result): as JSON would carry it. */
function cloneable(value: unknown): unknown {
  const seen = new WeakSet<object>();
  const text = JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v === 'function') return undefined;
    if (typeof v === 'object' && v !== null) {
      if (seen.has(v)) return undefined;
      seen.add(v);
    }
    return v;
  });
  return text === undefined ? undefined : (JSON.parse(text) as unknown);
}

/**
 * Bytes of a value as structured clone would carry it, roughly (strings at two bytes a
 * character, 16 for anything else), counted until `budget` is passed: then Infinity.
 * Checked before the result is posted: a result too big to carry (a string of 400 MB)
 * must not be copied (a copy of it can fail the whole process, not only this isolate).
 */
function sizeWithin(value: unknown, budget: number): number {
  let total = 0;
  const stack: unknown[] = [value];
  const seen = new Set<object>();
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') total += 16 + 2 * v.length;
    else total += 16;
    if (total > budget) return Infinity;
    if (typeof v === 'object' && v !== null && !seen.has(v)) {
      seen.add(v);
      if (Array.isArray(v)) {
        for (const item of v as unknown[]) stack.push(item);
      } else {
        for (const [key, item] of Object.entries(v)) {
          total += 2 * key.length;
          stack.push(item);
        }
      }
    }
  }
  return total;
}

/**
 * The answer to post: the result (what it shares with the sources as references), or
 * the error when what it carries is too big.
 */
function answer(call: EvaluationCall, value: unknown, sources: SharedSources): EvaluationAnswer {
  const carried = withSharedRefs(value, sources);
  if (sizeWithin(carried.value, call.maxResultBytes) > call.maxResultBytes) {
    return {
      id: call.id,
      held: records.size,
      error: { message: 'result too big', code: 'HG_EXPRESSION_RESULT' },
    };
  }
  return {
    id: call.id,
    held: records.size,
    value: carried.value,
    ...(carried.refs.length > 0 ? { refs: carried.refs } : {}),
  };
}

/** The pool's end: the thread's port, or the IPC channel of a child process. */
interface PoolPort {
  on(event: 'message', listener: (message: WorkerMessage) => void): unknown;
  postMessage(answer: EvaluationAnswer | 'ready'): void;
}

function poolPort(): PoolPort {
  if (parentPort) return parentPort;
  const send = process.send?.bind(process);
  if (!send) throw new Error('expression-worker.ts runs as a worker thread or a forked process');
  // Its parent gone, a child process has nothing left to do.
  process.on('disconnect', () => process.exit(0));
  return {
    on: (event, listener) => process.on(event, listener),
    postMessage: (answer) => send(answer),
  };
}

const port = poolPort();
port.on('message', (message: WorkerMessage) => {
  for (const key of message.drop ?? []) records.delete(key);
  if (!('source' in message)) return;
  const call = message;
  let pending: Promise<unknown>;
  let sources: SharedSources;
  try {
    const args = argumentsOf(call);
    sources = args.sources;
    pending = compiledOf(call).evaluate(args.input, args.bindings) as Promise<unknown>;
  } catch (error) {
    port.postMessage(failure(call.id, error));
    return;
  }
  pending.then(
    (value) => {
      const message = answer(call, value, sources);
      try {
        port.postMessage(message);
      } catch {
        // DataCloneError: a function in the result, left out as JSON leaves it out (a copy
        // of all of it: no references).
        port.postMessage({
          id: call.id,
          held: records.size,
          value: cloneable(value),
        } satisfies EvaluationAnswer);
      }
    },
    (error: unknown) => port.postMessage(failure(call.id, error)),
  );
});

// Loaded: the pool's deadlines count from here.
port.postMessage('ready');
