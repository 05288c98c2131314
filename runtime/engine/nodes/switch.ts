// The switch node: goes to the first case whose condition is truthy, else to
// `default` (default: the next node); passes its input on.
import type { WorkflowNode } from '../../../api/v1alpha1/workflow.ts';
import { truthy } from '../expressions.ts';
import type { NodeContext, Step } from './context.ts';

export async function switchNode(
  ctx: NodeContext,
  node: WorkflowNode,
  input: unknown,
): Promise<Step> {
  for (const branch of node.cases ?? []) {
    if (truthy(await ctx.evaluate(branch.condition, input))) {
      return { output: input, next: branch.next };
    }
  }
  return { output: input, next: node.default };
}
