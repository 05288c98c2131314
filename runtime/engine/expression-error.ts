// The errors of expression compilation and evaluation (expressions.ts, expression-pool.ts).

export class ExpressionError extends Error {
  readonly code: string | undefined;
  constructor(message: string, code?: string) {
    super(message);
    this.name = 'ExpressionError';
    this.code = code;
  }
}

/**
 * An evaluation ended by the worker pool's bounds (ADR 0048): past its memory limit, or
 * held past its time limit by one step. Not retried by a node's error policy: the
 * interpreter ends the execution with it.
 */
export class ExpressionLimitError extends ExpressionError {
  readonly limit: 'memory' | 'time';
  constructor(message: string, limit: 'memory' | 'time') {
    super(message, limit === 'memory' ? 'HG_EXPRESSION_MEMORY' : 'HG_EXPRESSION_TIME');
    this.name = 'ExpressionLimitError';
    this.limit = limit;
  }
}
