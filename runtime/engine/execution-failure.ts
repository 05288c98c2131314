// The error that ends an execution (as opposed to one a node's error policy handles).
import type { ErrorCode } from '../errors.ts';

/** Ends the execution: a fail node, a stop policy, the step limit, shutdown. */
export class ExecutionFailure extends Error {
  readonly nodeId: string | undefined;
  readonly statusCode: number;
  readonly code: ErrorCode;
  constructor(
    message: string,
    options: { nodeId?: string; statusCode?: number; code?: ErrorCode } = {},
  ) {
    super(message);
    this.name = 'ExecutionFailure';
    this.nodeId = options.nodeId;
    this.statusCode = options.statusCode ?? 500;
    this.code = options.code ?? 'HG_ERR_EXECUTION_FAILED';
  }
}
