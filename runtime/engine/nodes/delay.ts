// The delay node: waits `duration` (within the engine's limit), passes its input on.
import type { WorkflowNode } from '../../../api/v1alpha1/workflow.ts';
import { ExecutionFailure } from '../execution-failure.ts';
import { parseDuration, sleep } from '../util.ts';
import { withinRunTime, type NodeContext, type Step } from './context.ts';

export async function delayNode(
  ctx: NodeContext,
  node: WorkflowNode,
  input: unknown,
): Promise<Step> {
  const ms = parseDuration(node.duration ?? '0ms');
  const max = ctx.limits.maxDelayMs;
  if (ms > max) {
    throw new ExecutionFailure(
      `node '${node.id}': delay ${node.duration} exceeds the limit of ${max} ms`,
      { nodeId: node.id },
    );
  }
  await sleep(withinRunTime(ctx, node, ms, `delay ${node.duration ?? '0ms'}`), ctx.signal);
  return { output: input };
}
