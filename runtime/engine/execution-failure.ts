// The error that ends an execution (as opposed to one a node's error policy handles).
import type { ErrorCode } from '../errors.ts';
import type { FailureKind } from './ports.ts';
import { cut } from './util.ts';

/**
 * Longest failure message kept, in characters (longer ones are cut, an ellipsis marks
 * the cut). A message can carry what an expression made of the caller's body (a fail
 * node's message, `$error(…)`): it goes into the record, its log line, its events and
 * each failed attempt, none of which the stored-body bound cuts.
 */
export const MAX_FAILURE_MESSAGE = 2048;

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
    super(cut(message, MAX_FAILURE_MESSAGE));
    this.name = 'ExecutionFailure';
    this.nodeId = options.nodeId;
    this.statusCode = options.statusCode ?? 500;
    this.code = options.code ?? 'HG_ERR_EXECUTION_FAILED';
    this.kind = options.kind ?? (this.code === 'HG_ERR_OUTPUT_SCHEMA' ? 'validation' : 'workflow');
  }
}
