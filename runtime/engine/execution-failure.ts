// The error that ends an execution (as opposed to one a node's error policy handles).
import type { ErrorCode } from '../errors.ts';
import type { FailureKind } from './ports.ts';

/** Ends the execution: a fail node, a stop policy, the step limit, shutdown. */
export class ExecutionFailure extends Error {
  readonly nodeId: string | undefined;
  readonly statusCode: number;
  readonly code: ErrorCode;
  /** The failure class that decides whether a retry policy applies (retry-policy.ts). */
  readonly kind: FailureKind;
  constructor(
    message: string,
    options: { nodeId?: string; statusCode?: number; code?: ErrorCode; kind?: FailureKind } = {},
  ) {
    super(message);
    this.name = 'ExecutionFailure';
    this.nodeId = options.nodeId;
    this.statusCode = options.statusCode ?? 500;
    this.code = options.code ?? 'HG_ERR_EXECUTION_FAILED';
    this.kind = options.kind ?? (this.code === 'HG_ERR_OUTPUT_SCHEMA' ? 'validation' : 'workflow');
  }
}
