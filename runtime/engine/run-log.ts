// An execution's per-run log: one line per node run, opened when the node starts and
// closed (with its node.finished event) when it ends.
import type { WorkflowNode } from '../../api/v1alpha1/workflow.ts';
import type { ExecutionEvent, NodeRun } from './ports.ts';
import { summarize } from './util.ts';

/**
 * On a line whose input summary is made on demand: the length it is cut to. A symbol
 * key: JSON.stringify and structuredClone leave it out (a WeakMap of lines cost each
 * request a write barrier and the scavenger an ephemeron to visit).
 */
const SUMMARY_CUT_AT = Symbol('input summary made on demand, cut at');
type OnDemandRun = NodeRun & { [SUMMARY_CUT_AT]?: number };

/**
 * The log line of a node that starts. Without `inputSummary` the input is the trigger
 * record, which nothing else serialises in a run: its summary is made when the line is
 * first read (a getter, which structuredClone and JSON.stringify read like a field; the
 * record does not change), so runs whose log nobody reads never pay for it.
 */
export function startedRun(
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
  const run: OnDemandRun = {
    nodeId,
    type,
    startedAt,
    status: 'running',
    attempts: 0,
    [SUMMARY_CUT_AT]: max,
    get inputSummary(): string {
      return (summary ??= summarize(input, max));
    },
  };
  return run;
}

/**
 * For a line made by `startedRun` without an input summary (its input is the
 * execution's input), the length its summary is cut to; undefined for any other line.
 * A copy (a spread) has the summary as a plain value, so it is any other line. A store
 * that keeps the execution's input can keep such a line without its summary and make it
 * again on read (execution-store-redis.ts).
 */
export function inputSummaryOnDemand(run: NodeRun): number | undefined {
  const max = (run as OnDemandRun)[SUMMARY_CUT_AT];
  if (max === undefined) return undefined;
  return Object.getOwnPropertyDescriptor(run, 'inputSummary')?.get ? max : undefined;
}

/**
 * Closes a log line and returns its node.finished event. `outputSummary`: of the node
 * output, none when the node has no output.
 */
export function finishRun(
  run: NodeRun,
  durationMs: number,
  finishedAt: string,
  status: 'succeeded' | 'failed',
  outputSummary: string | undefined,
  error: string | undefined,
): ExecutionEvent {
  run.status = status;
  run.finishedAt = finishedAt;
  run.durationMs = durationMs;
  const event: ExecutionEvent = { type: 'node.finished', nodeId: run.nodeId, status };
  if (outputSummary !== undefined) run.outputSummary = event.outputSummary = outputSummary;
  if (error !== undefined) run.error = event.error = error;
  return event;
}
