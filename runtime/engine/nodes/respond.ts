// The respond node (ResponseToWebhook): the first one run sets the execution's
// response (status, headers, body: its expression, default the input) and emits it;
// later ones change nothing. Passes its input on.
import type { WorkflowNode } from '../../../api/v1alpha1/workflow.ts';
import { isoTime } from '../../time.ts';
import { toJson } from '../util.ts';
import type { NodeContext, Step } from './context.ts';

export async function respondNode(
  ctx: NodeContext,
  node: WorkflowNode,
  input: unknown,
): Promise<Step> {
  const body = toJson(node.expression ? await ctx.evaluate(node.expression, input) : input);
  const { execution } = ctx;
  if (!execution.response) {
    execution.response = {
      statusCode: node.statusCode ?? 200,
      headers: { ...(node.headers ?? {}) },
      body,
    };
    ctx.emit({ type: 'respond', response: structuredClone(execution.response) }, isoTime());
  }
  return { output: input };
}
