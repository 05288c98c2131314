// Runs one execution's workflow: walks the node graph, runs each node under its error
// policy (stop, continue, retry with backoff), keeps the per-run log with its node
// events, and makes the workflow output. What each node type does is in nodes/.
import type { WorkflowNode } from '../../api/v1alpha1/workflow.ts';
import { isoTime } from '../time.ts';
import type { EventStream } from './execution-events.ts';
import { ExecutionFailure, MAX_FAILURE_MESSAGE } from './execution-failure.ts';
import {
  ExpressionLimitError,
  type ExecutionExpressions,
  type ExpressionCache,
} from './expressions.ts';
import {
  runClock,
  withinRunTime,
  type NodeContext,
  type NodeLimits,
  type Step,
} from './nodes/context.ts';
import { runNodeType } from './nodes/index.ts';
import { OutboundRefusedError, type OutboundGuard, type OutboundTarget } from './outbound/guard.ts';
import type { Execution, ExecutionEvent, NodeRun, StartRequest } from './ports.ts';
import type { TraceSpan } from '../tracing/tracing.ts';
import { classifyNodeError } from './retry-policy.ts';
import { finishRun, startedRun } from './run-log.ts';
import {
  AbortedError,
  backoffDelay,
  cut,
  errorMessage,
  parseDuration,
  sleep,
  summarize,
  toJson,
} from './util.ts';

/** What the interpreter works on of an execution the engine runs. */
export interface Run {
  readonly execution: Execution;
  readonly request: StartRequest;
  readonly stream: EventStream;
  /** Aborted when the engine shuts down. */
  readonly abort: AbortController;
  /** The attempt's span, when tracing is on: each node run is a span under it. */
  readonly span?: TraceSpan | undefined;
}

export interface InterpreterOptions extends NodeLimits {
  expressions: ExpressionCache;
  outbound: OutboundGuard;
  /** Node runs per execution before it fails as a probable loop. */
  maxSteps: number;
}

/** The catalogue code of a node (and execution) failed by the outbound policy. */
const OUTBOUND_REFUSED_CODE = 'HG_ERR_OUTBOUND_REFUSED';

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

/**
 * An error no error policy handles: an ExecutionFailure, shutdown, or an expression past
 * the worker pool's memory or time bound (ADR 0048: retrying it would only do it again).
 */
function endsTheRun(error: unknown, signal: AbortSignal): boolean {
  return (
    error instanceof ExecutionFailure || error instanceof ExpressionLimitError || signal.aborted
  );
}

/** One execution's run: what its nodes see, and the bindings of its expressions. */
class RunContext implements NodeContext {
  readonly run: Run;
  readonly execution: Execution;
  readonly outbound: OutboundTarget;
  readonly limits: NodeLimits;
  readonly scope: string;
  readonly bindings: { trigger: unknown; nodes: Record<string, unknown> };
  readonly deadline: number;
  /** The span of the node running (tracing on): nodes run one at a time. */
  span: TraceSpan | undefined = undefined;
  /** This run's expressions: with worker isolation, its trigger record goes to each worker once. */
  readonly #expressions: ExecutionExpressions;

  constructor(run: Run, options: InterpreterOptions) {
    const { workflow } = run.request;
    this.run = run;
    this.execution = run.execution;
    this.outbound = options.outbound.forWorkflow(workflow);
    this.limits = options;
    this.scope = `${workflow.workflowId}@${workflow.generation}`;
    this.bindings = { trigger: run.execution.input, nodes: {} };
    this.deadline = runClock() + options.maxRunMs;
    this.#expressions = options.expressions.forExecution(this.bindings.trigger);
  }

  /** The run is over: what the expression workers keep of it is let go. */
  end(): void {
    this.#expressions.end();
  }

  /** Aborted when the engine shuts down (asked for by the nodes that wait). */
  get signal(): AbortSignal {
    return this.run.abort.signal;
  }

  evaluate(source: string, input: unknown): Promise<unknown> {
    return this.#expressions.evaluate(this.scope, source, input, this.bindings);
  }

  emit(event: ExecutionEvent, at: string): void {
    this.run.stream.emit(event, at);
  }
}

export class Interpreter {
  readonly #o: InterpreterOptions;

  constructor(options: InterpreterOptions) {
    this.#o = options;
  }

  /** Runs the workflow; resolves with its output, rejects with an ExecutionFailure. */
  async execute(run: Run): Promise<unknown> {
    const ctx = new RunContext(run, this.#o);
    try {
      return await this.#walk(ctx);
    } finally {
      ctx.end();
    }
  }

  /** Runs the nodes from the first, then the workflow output. */
  async #walk(ctx: RunContext): Promise<unknown> {
    const { run } = ctx;
    const nodes = run.request.workflow.spec.nodes;
    // Position of `current`: the following node needs no lookup, only jumps do.
    let position = 0;
    let current: WorkflowNode | undefined = nodes[0];
    let value: unknown = run.execution.input;
    // summarize(value): a node's output summary is the next node's input summary. None
    // yet for the trigger record (#runNode makes that one when it is read).
    let summary: string | undefined;
    // `value` is a plain JSON copy that nothing else holds (then the workflow output
    // needs no copy of its own): a transform output, passed on as it is or not.
    let json = false;
    let steps = 0;
    while (current) {
      steps++;
      if (steps > this.#o.maxSteps) {
        throw new ExecutionFailure(
          `step limit reached: ${this.#o.maxSteps} node runs (a loop?); next node was '${current.id}'`,
          { nodeId: current.id },
        );
      }
      if (runClock() >= ctx.deadline) {
        throw new ExecutionFailure(
          `run time limit reached: ${this.#o.maxRunMs} ms; next node was '${current.id}'`,
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
    const { workflow, outputValidator } = ctx.run.request;
    let output = last;
    if (workflow.spec.output) {
      try {
        output = await ctx.evaluate(workflow.spec.output, last);
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
    const max = this.#o.summaryLength;
    const started = Date.now();
    const run = startedRun(node, isoTime(started), input, inputSummary, max);
    if (ctx.run.request.workflow.spec.retry) run.attempt = ctx.execution.attempt ?? 1;
    ctx.execution.log.push(run);
    if (ctx.run.span !== undefined) ctx.span = ctx.run.span.node(node.id, node.type);
    ctx.emit({ type: 'node.started', nodeId: node.id, nodeType: node.type }, run.startedAt);
    const policy: { action: string; maxRetries?: number; backoff?: string } = node.onError ?? {
      action: 'stop',
    };
    const maxAttempts = policy.action === 'retry' ? 1 + (policy.maxRetries ?? 3) : 1;
    let lastError: unknown;
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      run.attempts = attempt;
      try {
        const step = await runNodeType(ctx, node, input);
        // Pass-through nodes (if, switch, delay, respond) output their input as it is.
        step.summary ??=
          step.output === input && inputSummary !== undefined
            ? inputSummary
            : summarize(step.output, max);
        const logged = step.output === undefined ? undefined : step.summary;
        this.#finish(ctx, run, started, 'succeeded', logged);
        return step;
      } catch (error) {
        if (endsTheRun(error, ctx.signal)) return this.#stop(ctx, run, started, node, error);
        lastError = error;
        // The policy refuses the same destination again: no point in retrying.
        if (error instanceof OutboundRefusedError) break;
      }
      if (attempt < maxAttempts) {
        const base = parseDuration(policy.backoff ?? '200ms');
        try {
          const wait = withinRunTime(
            ctx,
            node,
            backoffDelay(base, attempt),
            'the wait before its next attempt',
          );
          await sleep(wait, ctx.signal);
        } catch (error) {
          return this.#stop(ctx, run, started, node, error);
        }
      }
    }
    if (policy.action === 'continue') return this.#passOn(ctx, run, started, node, lastError);
    return this.#stop(ctx, run, started, node, lastError);
  }

  /** The `continue` policy: the error becomes the node output. */
  #passOn(
    ctx: RunContext,
    run: NodeRun,
    started: number,
    node: WorkflowNode,
    error: unknown,
  ): Step {
    const message = cut(errorMessage(error), MAX_FAILURE_MESSAGE);
    const code = error instanceof OutboundRefusedError ? OUTBOUND_REFUSED_CODE : undefined;
    if (code) run.code = code;
    const output = { error: { message, nodeId: node.id, ...(code ? { code } : {}) } };
    const summary = summarize(output, this.#o.summaryLength);
    this.#finish(ctx, run, started, 'failed', summary, message);
    return { output, summary };
  }

  #stop(ctx: RunContext, run: NodeRun, started: number, node: WorkflowNode, error: unknown): never {
    const failure =
      error instanceof ExecutionFailure
        ? error
        : error instanceof ExpressionLimitError
          ? new ExecutionFailure(`node '${node.id}': ${error.message}`, { nodeId: node.id })
          : error instanceof AbortedError || ctx.signal.aborted
            ? new ExecutionFailure(`engine shut down during node '${node.id}'`, {
                nodeId: node.id,
                kind: 'shutdown',
              })
            : new ExecutionFailure(`node '${node.id}' failed: ${errorMessage(error)}`, {
                nodeId: node.id,
                kind: classifyNodeError(error),
                ...(error instanceof OutboundRefusedError ? { code: OUTBOUND_REFUSED_CODE } : {}),
              });
    if (failure.code === OUTBOUND_REFUSED_CODE) run.code = failure.code;
    this.#finish(ctx, run, started, 'failed', undefined, failure.message, failure.kind);
    throw failure;
  }

  /** `outputSummary`: of the node output, none when the node has no output. */
  #finish(
    ctx: RunContext,
    run: NodeRun,
    started: number,
    status: 'succeeded' | 'failed',
    outputSummary: string | undefined,
    error?: string,
    errorType?: string,
  ): void {
    const span = ctx.span;
    if (span !== undefined) {
      if (status === 'failed') span.fail(error ?? 'failed', errorType);
      span.end();
      ctx.span = undefined;
    }
    const finished = Date.now();
    const finishedAt = isoTime(finished);
    ctx.emit(
      finishRun(run, finished - started, finishedAt, status, outputSummary, error),
      finishedAt,
    );
  }
}
