// The if node: goes to `then` when its condition is truthy, else to `else` (either
// default: the next node); passes its input on.
import type { WorkflowNode } from '../../../api/v1alpha1/workflow.ts';
import { truthy } from '../expressions.ts';
import type { NodeContext, Step } from './context.ts';

export async function ifNode(ctx: NodeContext, node: WorkflowNode, input: unknown): Promise<Step> {
  const condition = truthy(await ctx.evaluate(node.condition ?? 'false', input));
  return { output: input, next: condition ? node.then : node.else };
}
