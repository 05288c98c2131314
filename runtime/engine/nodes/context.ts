// What a node is given to run and what it hands back: the contract between the
// interpreter (../interpreter.ts) and the node types in this folder.
import type { WorkflowNode } from '../../../api/v1alpha1/workflow.ts';
import { ExecutionFailure } from '../execution-failure.ts';
import type { OutboundTarget } from '../outbound/guard.ts';
import type { Execution, ExecutionEvent } from '../ports.ts';
import type { TraceSpan } from '../../tracing/tracing.ts';

/** One node run's result. */
export interface Step {
  output: unknown;
  /** `summarize(output)`, when the node had it at hand (see the interpreter's runNode). */
  summary?: string;
  /** `output` is a plain JSON copy made by the node (what `toJson` would return). */
  json?: boolean;
  /** Node to go to; undefined: `next`, else the following node in the list. */
  next?: string | undefined;
}

/** The engine's settings that nodes obey. */
export interface NodeLimits {
  /** Longest delay node allowed. */
  maxDelayMs: number;
  /**
   * Longest time an http node's attempt may be given (`request.timeout`): without it a
   * workflow held a run slot of the engine for days per attempt against a server that
   * never answers (the schema allows 999999m), and past 49.7 days the timer refused it.
   */
  maxHttpTimeoutMs: number;
  /**
   * Longest one attempt of a run may take: without it a loop of delays (1000 node runs of
   * 15 min each) held one of the engine's run slots for ten days, and 64 of them every
   * slot of the process.
   */
  maxRunMs: number;
  /** Length of the input/output summaries in the per-run log. */
  summaryLength: number;
  /** First wait between http node retries (doubles, with jitter). */
  httpBackoffMs: number;
}

/** What a node sees of the execution it runs in. */
export interface NodeContext {
  readonly execution: Execution;
  /** Aborts when the engine shuts down: waits and outbound requests stop. */
  readonly signal: AbortSignal;
  /**
   * When the run's attempt reaches its time limit: `limits.maxRunMs` after its start, on
   * the monotonic clock (`performance.now()`, runClock), not the wall clock, which a
   * host may step (NTP, a VM resumed): a step forward failed every run at its next node.
   */
  readonly deadline: number;
  /** Address guard for outbound requests: the cluster policy narrowed for this workflow. */
  readonly outbound: OutboundTarget;
  readonly limits: NodeLimits;
  /** The node run's span, when tracing is on: outbound requests are CLIENT spans under it. */
  readonly span: TraceSpan | undefined;
  /** Evaluates a JSONata expression on `input` with the run's $trigger and $nodes. */
  evaluate(source: string, input: unknown): Promise<unknown>;
  /** Adds an event to the execution's stream. */
  emit(event: ExecutionEvent, at: string): void;
}

/** The clock of run deadlines: whole milliseconds that only go on (performance.now()). */
export function runClock(): number {
  return Math.floor(performance.now());
}

/**
 * `wanted` ms for `what` (a delay, the wait before a retry) when the run has as much
 * time left; else the node fails now, naming the limit: its run slot is not held for a
 * wait that could not end in time.
 */
export function withinRunTime(
  ctx: NodeContext,
  node: WorkflowNode,
  wanted: number,
  what: string,
): number {
  const left = ctx.deadline - runClock();
  if (wanted <= left) return wanted;
  throw runTimeFailure(ctx, node, what, left);
}

/** What is left of the run's time for `what` (an http attempt), or the node fails. */
export function runTimeLeft(ctx: NodeContext, node: WorkflowNode, what: string): number {
  const left = ctx.deadline - runClock();
  if (left > 0) return left;
  throw runTimeFailure(ctx, node, what, left);
}

/** The failure of a node whose `what` met the run's time limit (`left` ms were left). */
export function runTimeFailure(
  ctx: NodeContext,
  node: WorkflowNode,
  what: string,
  left: number,
): ExecutionFailure {
  return new ExecutionFailure(
    `node '${node.id}': ${what} would pass the run's time limit of ${ctx.limits.maxRunMs} ms (${Math.max(0, left)} ms left)`,
    { nodeId: node.id },
  );
}

export type NodeHandler = (ctx: NodeContext, node: WorkflowNode, input: unknown) => Promise<Step>;
