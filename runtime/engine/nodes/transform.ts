// The transform node: its output is its JSONata expression (default `$`) on the input.
import type { WorkflowNode } from '../../../api/v1alpha1/workflow.ts';
import { toJsonSummarized } from '../util.ts';
import type { NodeContext, Step } from './context.ts';

export async function transformNode(
  ctx: NodeContext,
  node: WorkflowNode,
  input: unknown,
): Promise<Step> {
  const value = await ctx.evaluate(node.expression ?? '$', input);
  const { json, summary } = toJsonSummarized(value, ctx.limits.summaryLength);
  return { output: json, summary, json: true };
}
