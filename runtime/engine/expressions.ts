// JSONata expressions: compiled once per workflow generation, evaluated with a time
// and depth limit. Bindings: $trigger (the trigger output record) and $nodes (node id →
// output); the input `$` is chosen by the caller (see docs/workflows.md). Field
// mappings go through a fast path that gives JSONata's answer without its evaluator
// (expression-fast-path.ts). Regular expressions run on V8's linear-time engine (a
// synchronous backtracking match is out of reach of the time limit): a pattern it
// cannot run does not compile (../../api/linear-regex.ts). What the fast path leaves
// evaluates in this process (`inline`) or in a pool of worker processes bounded in
// memory and time (`worker`, expression-pool.ts, ADR 0048): two adapters of one port.
// An execution's expressions go through forExecution(): with `worker`, its trigger
// record then goes to each worker once, not with every call.
import jsonata from 'jsonata';
import { LinearRegExp, nonLinearRegex } from '../../api/linear-regex.ts';
import { ExpressionError } from './expression-error.ts';
import { fastPathOf, UNDECIDED, type FastEvaluator } from './expression-fast-path.ts';
import { needsOf, type ExpressionNeeds } from './expression-needs.ts';
import {
  ExpressionWorkerPool,
  type ContextCount,
  type ExecutionContext,
  type ExpressionPoolOptions,
} from './expression-pool.ts';

export { ExpressionError, ExpressionLimitError } from './expression-error.ts';

/** A compiled expression, and its fast path when it has one. */
interface Compiled {
  expression: jsonata.Expression;
  fast: FastEvaluator | undefined;
  /** What it reads of its bindings (worked out when a worker first evaluates it). */
  needs?: ExpressionNeeds;
  /**
   * Handed out by compile(): its caller may register functions on it (tests do), which
   * only this process' copy has, so it is evaluated here whatever the isolation.
   */
  handedOut?: true;
}

export interface ExpressionLimits {
  /** Evaluation time limit per expression (JSONata's own guard), default 1000 ms. */
  timeoutMs?: number;
  /** Evaluation depth limit, default 500. */
  maxDepth?: number;
  /** Workflow generations whose compiled expressions are kept, default 512 (LRU). */
  maxGenerations?: number;
  /**
   * Where JSONata evaluates what the fast path leaves: `inline` (this process; functions
   * registered on a compiled expression work) or `worker` (a pool of worker processes,
   * each evaluation bounded in memory and time). Default: HOOKGATE_EXPRESSION_ISOLATION,
   * else `inline` (ADR 0048); `pool` defaults to HOOKGATE_EXPRESSION_WORKERS and
   * HOOKGATE_EXPRESSION_WORKER_MEMORY_MB.
   */
  isolation?: ExpressionIsolation;
  /** The worker pool's size and heap limits (isolation `worker`). */
  pool?: ExpressionPoolOptions;
}

export type ExpressionIsolation = 'inline' | 'worker';

/**
 * The expression settings of the environment: HOOKGATE_EXPRESSION_ISOLATION (`inline`,
 * the default, or `worker`), HOOKGATE_EXPRESSION_WORKERS (the pool's size, default
 * os.availableParallelism()) and HOOKGATE_EXPRESSION_WORKER_MEMORY_MB (each worker's
 * old-generation heap, default 64). Throws on a value it cannot use (roles/settings.ts
 * reports it at start).
 */
export function expressionSettingsFromEnv(env: NodeJS.ProcessEnv = process.env): {
  isolation: ExpressionIsolation;
  pool: ExpressionPoolOptions;
} {
  const raw = env.HOOKGATE_EXPRESSION_ISOLATION;
  let isolation: ExpressionIsolation;
  if (raw === undefined || raw === '' || raw === 'inline') isolation = 'inline';
  else if (raw === 'worker') isolation = 'worker';
  else throw new Error(`invalid HOOKGATE_EXPRESSION_ISOLATION "${raw}" (inline, worker)`);
  const pool: ExpressionPoolOptions = {};
  const size = positive(env, 'HOOKGATE_EXPRESSION_WORKERS');
  if (size !== undefined) pool.size = size;
  const memory = positive(env, 'HOOKGATE_EXPRESSION_WORKER_MEMORY_MB');
  if (memory !== undefined) pool.maxOldGenerationSizeMb = memory;
  return { isolation, pool };
}

function positive(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) {
    throw new Error(`invalid ${name} "${raw}" (a whole number from 1)`);
  }
  return value;
}

/** The port of JSONata's evaluation (what the fast path leaves). */
interface JsonataEvaluator {
  evaluate(
    compiled: Compiled,
    source: string,
    input: unknown,
    bindings: Record<string, unknown>,
    context?: ExecutionContext,
  ): Promise<unknown>;
  /** A context for one execution's evaluations (`record`: its trigger record), if it keeps any. */
  openContext(record: unknown): ExecutionContext | undefined;
  closeContext(context: ExecutionContext): void;
  /** What each worker holds of executions (tests). */
  contextCounts(): ContextCount[];
  close(): Promise<void>;
}

/** In this process, on the compiled expression (registered functions included). */
const inlineEvaluator: JsonataEvaluator = {
  openContext: () => undefined,
  closeContext: () => {},
  contextCounts: () => [],
  evaluate(compiled, _source, input, bindings) {
    // JSONata's promise is handed on, not wrapped in another one.
    return (compiled.expression.evaluate(input, bindings) as Promise<unknown>).then(
      undefined,
      (error) => {
        throw wrap(error, 'expression failed');
      },
    );
  },
  close: () => Promise.resolve(),
};

/** In a worker of the pool (a child process, or a thread for the bench; compiled there again, once per worker). */
function workerEvaluator(
  pool: ExpressionWorkerPool,
  limits: { timeoutMs: number; maxDepth: number },
): JsonataEvaluator {
  return {
    evaluate: (compiled, source, input, bindings, context) => {
      compiled.needs ??= needsOf(compiled.expression.ast());
      return pool.evaluate({ source, input, bindings, needs: compiled.needs, context }, limits);
    },
    openContext: (record) => pool.openContext(record),
    closeContext: (context) => pool.closeContext(context),
    contextCounts: () => pool.contextCounts(),
    close: () => pool.close(),
  };
}

/**
 * One execution's expressions: evaluated as ExpressionCache.evaluate does, with its
 * trigger record (`$trigger`, and `$` while the input is that record) sent to each
 * worker once. end() when the execution ends: what the workers keep of it is let go.
 */
export interface ExecutionExpressions {
  evaluate(
    scope: string,
    source: string,
    input: unknown,
    bindings: Record<string, unknown>,
  ): Promise<unknown>;
  end(): void;
}

/** JSONata throws plain objects `{ code, message, position, token }`. */
function wrap(error: unknown, what: string): ExpressionError {
  if (typeof error === 'object' && error !== null) {
    const e = error as { code?: unknown; message?: unknown; position?: unknown };
    const code = typeof e.code === 'string' ? e.code : undefined;
    const message = typeof e.message === 'string' ? e.message : 'unknown error';
    const position = typeof e.position === 'number' ? ` at position ${e.position}` : '';
    return new ExpressionError(`${what}: ${message}${code ? ` (${code}${position})` : ''}`, code);
  }
  return new ExpressionError(`${what}: ${String(error)}`);
}

export class ExpressionCache {
  readonly #generations = new Map<string, Map<string, Compiled>>();
  /** The scope used last, the newest in the LRU order already. */
  #newest: string | undefined;
  readonly #timeoutMs: number;
  readonly #maxDepth: number;
  readonly #maxGenerations: number;
  readonly #jsonata: JsonataEvaluator;
  /** An execution's expressions when its evaluator keeps nothing of it (`inline`). */
  readonly #unkept: ExecutionExpressions = {
    evaluate: (...args) => this.evaluate(...args),
    end: () => {},
  };
  readonly isolation: ExpressionIsolation;

  constructor(limits: ExpressionLimits = {}) {
    this.#timeoutMs = limits.timeoutMs ?? 1000;
    this.#maxDepth = limits.maxDepth ?? 500;
    this.#maxGenerations = limits.maxGenerations ?? 512;
    const fromEnv =
      limits.isolation === undefined || limits.pool === undefined
        ? expressionSettingsFromEnv()
        : undefined;
    this.isolation = limits.isolation ?? fromEnv?.isolation ?? 'inline';
    this.#jsonata =
      this.isolation === 'worker'
        ? workerEvaluator(new ExpressionWorkerPool(limits.pool ?? fromEnv?.pool), {
            timeoutMs: this.#timeoutMs,
            maxDepth: this.#maxDepth,
          })
        : inlineEvaluator;
  }

  /** What each started worker holds of executions' trigger records (isolation `worker`; tests). */
  contextCounts(): ContextCount[] {
    return this.#jsonata.contextCounts();
  }

  /** Ends the worker pool (isolation `worker`); evaluations waiting fail. */
  close(): Promise<void> {
    return this.#jsonata.close();
  }

  /**
   * Compiled expression for `source` within one workflow generation (`scope`). Functions
   * registered on it work: it is then evaluated in this process, whatever the isolation.
   */
  compile(scope: string, source: string): jsonata.Expression {
    const entry = this.#compiled(scope, source);
    entry.handedOut = true;
    return entry.expression;
  }

  #compiled(scope: string, source: string): Compiled {
    let compiled = this.#generations.get(scope);
    if (compiled) {
      // Refresh LRU position (a delete and an insert: only when another scope came since).
      if (scope !== this.#newest) {
        this.#generations.delete(scope);
        this.#generations.set(scope, compiled);
      }
    } else {
      compiled = new Map();
      this.#generations.set(scope, compiled);
      while (this.#generations.size > this.#maxGenerations) {
        const oldest = this.#generations.keys().next().value;
        if (oldest === undefined) break;
        this.#generations.delete(oldest);
      }
    }
    this.#newest = scope;
    let entry = compiled.get(source);
    if (!entry) {
      let expression: jsonata.Expression;
      try {
        expression = jsonata(source, {
          timeout: this.#timeoutMs,
          stack: this.#maxDepth,
          RegexEngine: LinearRegExp,
        });
      } catch (error) {
        throw wrap(error, 'invalid expression');
      }
      const regex = nonLinearRegex(expression.ast());
      if (regex) throw new ExpressionError(`invalid expression: ${regex}`);
      entry = { expression, fast: fastPathOf(expression) };
      compiled.set(source, entry);
    }
    return entry;
  }

  /** Number of compiled expressions held for a scope (for tests). */
  size(scope: string): number {
    return this.#generations.get(scope)?.size ?? 0;
  }

  /** The expressions of one execution whose trigger record is `record`; end() it when it ends. */
  forExecution(record: unknown): ExecutionExpressions {
    const context = this.#jsonata.openContext(record);
    if (!context) return this.#unkept;
    let ended = false;
    return {
      evaluate: (scope, source, input, bindings) =>
        this.#evaluate(scope, source, input, bindings, ended ? undefined : context),
      end: () => {
        if (ended) return;
        ended = true;
        this.#jsonata.closeContext(context);
      },
    };
  }

  /** Rejects with an ExpressionError when `source` does not compile or evaluation fails. */
  evaluate(
    scope: string,
    source: string,
    input: unknown,
    bindings: Record<string, unknown>,
  ): Promise<unknown> {
    return this.#evaluate(scope, source, input, bindings, undefined);
  }

  #evaluate(
    scope: string,
    source: string,
    input: unknown,
    bindings: Record<string, unknown>,
    context: ExecutionContext | undefined,
  ): Promise<unknown> {
    let entry: Compiled;
    try {
      entry = this.#compiled(scope, source);
    } catch (error) {
      // compile throws ExpressionErrors only
      return Promise.reject(error instanceof Error ? error : wrap(error, 'invalid expression'));
    }
    if (entry.fast) {
      const value = entry.fast(input, bindings);
      if (value !== UNDECIDED) return Promise.resolve(value);
    }
    const evaluator = entry.handedOut ? inlineEvaluator : this.#jsonata;
    return evaluator.evaluate(entry, source, input, bindings, context);
  }
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
