// The fail node: ends the execution with its message expression (or a default) and
// status code (default 500).
import type { WorkflowNode } from '../../../api/v1alpha1/workflow.ts';
import { ExecutionFailure } from '../execution-failure.ts';
import { errorMessage, summarize, toJson } from '../util.ts';
import type { NodeContext } from './context.ts';

export async function failNode(
  ctx: NodeContext,
  node: WorkflowNode,
  input: unknown,
): Promise<never> {
  let message = `workflow failed at node '${node.id}'`;
  if (node.expression) {
    try {
      const value = await ctx.evaluate(node.expression, input);
      message = typeof value === 'string' ? value : summarize(toJson(value));
    } catch (error) {
      message = `${message} (message expression failed: ${errorMessage(error)})`;
    }
  }
  throw new ExecutionFailure(message, {
    nodeId: node.id,
    statusCode: node.statusCode ?? 500,
    kind: 'fail',
  });
}
