// The node types: which handler runs a node (one file per type in this folder).
import type { WorkflowNode } from '../../../api/v1alpha1/workflow.ts';
import { ExecutionFailure } from '../execution-failure.ts';
import type { NodeContext, Step } from './context.ts';
import { delayNode } from './delay.ts';
import { failNode } from './fail.ts';
import { httpNode } from './http.ts';
import { ifNode } from './if.ts';
import { respondNode } from './respond.ts';
import { switchNode } from './switch.ts';
import { transformNode } from './transform.ts';

/** Runs one attempt of `node` on `input`; throws for an unknown node type. */
export function runNodeType(ctx: NodeContext, node: WorkflowNode, input: unknown): Promise<Step> {
  switch (node.type) {
    case 'transform':
      return transformNode(ctx, node, input);
    case 'delay':
      return delayNode(ctx, node, input);
    case 'if':
      return ifNode(ctx, node, input);
    case 'switch':
      return switchNode(ctx, node, input);
    case 'respond':
      return respondNode(ctx, node, input);
    case 'fail':
      return failNode(ctx, node, input);
    case 'http':
      return httpNode(ctx, node, input);
    default: {
      const unknownType: string = (node as { type: string }).type;
      throw new ExecutionFailure(`node '${node.id}': unknown node type '${unknownType}'`, {
        nodeId: node.id,
      });
    }
  }
}
