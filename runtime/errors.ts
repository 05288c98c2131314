// The error catalogue: every error the runtime answers with is declared here once,
// with a stable code, an RFC 9457 problem `type`, a title and an HTTP status.
// docs/errors.md documents each entry; test/unit/errors.test.ts keeps the two in step.
import createError, { type FastifyErrorConstructor } from '@fastify/error';

export const PROBLEM_BASE = 'https://hookgate.dev/problems/';

interface Entry {
  status: number;
  /** Last segment of the problem type URI. */
  type: string;
  title: string;
}

export const CATALOGUE = {
  HG_ERR_ROUTE_NOT_FOUND: {
    status: 404,
    type: 'route-not-found',
    title: 'No webhook endpoint at this path',
  },
  HG_ERR_METHOD_NOT_ALLOWED: {
    status: 405,
    type: 'method-not-allowed',
    title: 'Method not enabled for this endpoint',
  },
  HG_ERR_WORKFLOW_NOT_FOUND: {
    status: 404,
    type: 'workflow-not-found',
    title: 'Workflow not found',
  },
  HG_ERR_HTTPS_REQUIRED: { status: 403, type: 'https-required', title: 'HTTPS required' },
  HG_ERR_CREDENTIALS_MISSING: {
    status: 401,
    type: 'credentials-missing',
    title: 'Credentials missing',
  },
  HG_ERR_CREDENTIALS_INVALID: {
    status: 401,
    type: 'credentials-invalid',
    title: 'Credentials invalid',
  },
  HG_ERR_INSUFFICIENT_SCOPE: {
    status: 403,
    type: 'insufficient-scope',
    title: 'Insufficient scope',
  },
  HG_ERR_AUTH_UNAVAILABLE: {
    status: 503,
    type: 'auth-unavailable',
    title: 'Authentication provider unavailable',
  },
  HG_ERR_AUTH_OVERLOADED: {
    status: 503,
    type: 'auth-overloaded',
    title: 'Too many token checks in progress',
  },
  HG_ERR_SIGNATURE_MISSING: {
    status: 401,
    type: 'signature-missing',
    title: 'Signature missing',
  },
  HG_ERR_SIGNATURE_MALFORMED: {
    status: 401,
    type: 'signature-malformed',
    title: 'Signature malformed',
  },
  HG_ERR_SIGNATURE_EXPIRED: {
    status: 401,
    type: 'signature-timestamp-outside-tolerance',
    title: 'Signed timestamp outside the tolerance',
  },
  HG_ERR_SIGNATURE_MISMATCH: {
    status: 401,
    type: 'signature-mismatch',
    title: 'No signature matched',
  },
  HG_ERR_SIGNATURE_REPLAYED: {
    status: 401,
    type: 'signature-replayed',
    title: 'Delivery replayed',
  },
  HG_ERR_CORS_ORIGIN_DENIED: {
    status: 403,
    type: 'cors-origin-denied',
    title: 'Origin not allowed',
  },
  HG_ERR_RATE_LIMITED: { status: 429, type: 'rate-limited', title: 'Rate limit exceeded' },
  HG_ERR_RATE_LIMIT_UNAVAILABLE: {
    status: 503,
    type: 'rate-limit-unavailable',
    title: 'Rate limiter unavailable',
  },
  HG_ERR_BODY_TOO_LARGE: { status: 413, type: 'body-too-large', title: 'Request body too large' },
  HG_ERR_BODY_MALFORMED: {
    status: 400,
    type: 'malformed-body',
    title: 'Request body could not be parsed',
  },
  HG_ERR_BODY_TOO_DEEP: {
    status: 400,
    type: 'json-too-deep',
    title: 'Request body nested too deeply',
  },
  HG_ERR_BODY_TOO_MANY_KEYS: {
    status: 400,
    type: 'too-many-keys',
    title: 'Request body has too many keys',
  },
  HG_ERR_BODY_STRING_TOO_LONG: {
    status: 400,
    type: 'string-too-long',
    title: 'String in the request body too long',
  },
  HG_ERR_BODY_NUMBER_OUT_OF_RANGE: {
    status: 400,
    type: 'json-number-out-of-range',
    title: 'Number in the request body out of range',
  },
  HG_ERR_UNSUPPORTED_MEDIA_TYPE: {
    status: 415,
    type: 'unsupported-media-type',
    title: 'Unsupported media type',
  },
  HG_ERR_SCHEMA_VALIDATION: {
    status: 422,
    type: 'schema-validation-failed',
    title: 'Request does not match the input schema',
  },
  HG_ERR_REQUEST_TIMEOUT: {
    status: 408,
    type: 'request-timeout',
    title: 'Workflow did not respond in time',
  },
  HG_ERR_EXECUTION_FAILED: {
    status: 500,
    type: 'execution-failed',
    title: 'Workflow execution failed',
  },
  HG_ERR_OUTPUT_SCHEMA: {
    status: 500,
    type: 'output-schema-violation',
    title: 'Workflow output does not match the output schema',
  },
  HG_ERR_OUTBOUND_REFUSED: {
    status: 500,
    type: 'outbound-refused',
    title: 'Outbound request refused by the outbound policy',
  },
  HG_ERR_TRIGGER_RECREATED: {
    status: 500,
    type: 'trigger-recreated',
    title: 'The trigger was re-created before the execution ran',
  },
  HG_ERR_IDEMPOTENCY_KEY_INVALID: {
    status: 400,
    type: 'idempotency-key-invalid',
    title: 'Idempotency-Key header invalid',
  },
  HG_ERR_IDEMPOTENCY_KEY_REUSED: {
    status: 422,
    type: 'idempotency-key-reused',
    title: 'Idempotency key reused with a different request',
  },
  HG_ERR_IDEMPOTENCY_IN_PROGRESS: {
    status: 409,
    type: 'idempotency-in-progress',
    title: 'A request with this idempotency key is still being processed',
  },
  HG_ERR_CALLBACK_URL_MISSING: {
    status: 400,
    type: 'callback-url-missing',
    title: 'Callback URL missing',
  },
  HG_ERR_CALLBACK_URL_REFUSED: {
    status: 400,
    type: 'callback-url-refused',
    title: 'Callback URL refused',
  },
  HG_ERR_EXECUTION_NOT_FOUND: {
    status: 404,
    type: 'execution-not-found',
    title: 'Execution not found',
  },
  HG_ERR_EXECUTION_DISCARDED: {
    status: 410,
    type: 'execution-discarded',
    title: 'The execution already ran; its result was discarded',
  },
  HG_ERR_EXECUTION_RESULT_GONE: {
    status: 410,
    type: 'execution-result-gone',
    title: "The execution's result is no longer available",
  },
  HG_ERR_EXECUTION_RESULT_UNAVAILABLE: {
    status: 503,
    type: 'execution-result-unavailable',
    title: "The execution's result is not available; send the delivery again",
  },
  HG_ERR_EXECUTION_LINK_NOT_FOUND: {
    status: 404,
    type: 'execution-link-not-found',
    title: 'Execution link not found',
  },
  HG_ERR_EXECUTION_STREAMS_EXCEEDED: {
    status: 429,
    type: 'execution-streams-exceeded',
    title: 'Too many open event streams of this execution',
  },
  HG_ERR_DEAD_LETTER_NOT_FOUND: {
    status: 404,
    type: 'dead-letter-not-found',
    title: 'Dead letter not found',
  },
  HG_ERR_REPLAY_DEAD_LETTER_TAKEN: {
    status: 409,
    type: 'replay-dead-letter-taken',
    title: 'A retry of this dead letter started at the same time',
  },
  HG_ERR_REPLAY_TRIGGER_GONE: {
    status: 409,
    type: 'replay-trigger-gone',
    title: 'The trigger of this request is no longer deployed',
  },
  HG_ERR_REPLAY_TRIGGER_RECREATED: {
    status: 409,
    type: 'replay-trigger-recreated',
    title: 'The trigger of this request was deleted and re-created',
  },
  HG_ERR_REPLAY_BODY_TRUNCATED: {
    status: 409,
    type: 'replay-body-truncated',
    title: 'The stored request body was truncated',
  },
  HG_ERR_REPLAY_SCHEMA_REJECTED: {
    status: 422,
    type: 'replay-schema-rejected',
    title: 'The stored request does not match the current input schema',
  },
  HG_ERR_RESOURCE_NOT_FOUND: {
    status: 404,
    type: 'resource-not-found',
    title: 'Resource not found',
  },
  HG_ERR_TEST_CREDENTIALS_MISSING: {
    status: 409,
    type: 'test-credentials-missing',
    title: 'No test credentials saved',
  },
  HG_ERR_SCHEMA_NOT_LEARNING: {
    status: 409,
    type: 'schema-not-learning',
    title: 'The trigger is not learning its schema',
  },
  HG_ERR_INVALID_PARAMETER: {
    status: 400,
    type: 'invalid-parameter',
    title: 'Invalid query or path parameter',
  },
  HG_ERR_ADMIN_UNAUTHENTICATED: {
    status: 401,
    type: 'admin-unauthenticated',
    title: 'Admin API token missing or invalid',
  },
  HG_ERR_ADMIN_FORBIDDEN: {
    status: 403,
    type: 'admin-forbidden',
    title: 'Not allowed by the admin API',
  },
  HG_ERR_NOT_FOUND: { status: 404, type: 'not-found', title: 'Not found' },
  HG_ERR_BAD_REQUEST: { status: 400, type: 'bad-request', title: 'Malformed HTTP request' },
  HG_ERR_BAD_URL: { status: 400, type: 'malformed-url', title: 'Malformed request URL' },
  HG_ERR_URI_TOO_LONG: { status: 414, type: 'uri-too-long', title: 'Request URL too long' },
  HG_ERR_HEADERS_TOO_LARGE: {
    status: 431,
    type: 'headers-too-large',
    title: 'Request headers too large',
  },
  HG_ERR_EXPECTATION_FAILED: {
    status: 417,
    type: 'expectation-failed',
    title: 'Expectation not supported',
  },
  HG_ERR_CLIENT_TIMEOUT: {
    status: 408,
    type: 'client-timeout',
    title: 'Request not received in time',
  },
  HG_ERR_SHUTTING_DOWN: { status: 503, type: 'shutting-down', title: 'Server is shutting down' },
  HG_ERR_ENGINE_OVERLOADED: {
    status: 503,
    type: 'engine-overloaded',
    title: 'Too many executions queued',
  },
  HG_ERR_STREAMS_EXHAUSTED: {
    status: 503,
    type: 'streams-exhausted',
    title: 'Too many open event streams on this server',
  },
  HG_ERR_STORE_FULL: {
    status: 503,
    type: 'store-full',
    title: 'Shared store full',
  },
  HG_ERR_STORE_UNAVAILABLE: {
    status: 503,
    type: 'store-unavailable',
    title: 'Shared store unavailable',
  },
  HG_ERR_ANALYTICS_UNAVAILABLE: {
    status: 503,
    type: 'analytics-unavailable',
    title: 'Analytics backend unavailable',
  },
  HG_ERR_ANALYTICS_TIMEOUT: {
    status: 504,
    type: 'analytics-timeout',
    title: 'Analytics backend did not answer in time',
  },
  HG_ERR_INTERNAL: { status: 500, type: 'internal', title: 'Internal error' },
} as const satisfies Record<string, Entry>;

export type ErrorCode = keyof typeof CATALOGUE;

/**
 * A field-level problem, as the `errors` extension of a problem document carries it: a
 * JSON Pointer (RFC 6901) into the request body, or `#/header/<name>` / `#/query/<name>`.
 */
export type { FieldProblem } from '../api/schemas.ts';
import type { FieldProblem } from '../api/schemas.ts';

/** An RFC 9457 problem details document. */
export interface ProblemDocument {
  type: string;
  title: string;
  status: number;
  detail?: string;
  instance?: string;
  code: ErrorCode;
  errors?: FieldProblem[];
  [extension: string]: unknown;
}

const constructors = new Map<ErrorCode, FastifyErrorConstructor>();
for (const [code, entry] of Object.entries(CATALOGUE) as [ErrorCode, Entry][]) {
  constructors.set(code, createError(code, '%s', entry.status));
}

/**
 * An error that becomes a problem response. Throw it (or return it) anywhere in the
 * request path; the gateway's error handler turns it into application/problem+json.
 */
export class HttpProblem extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly extensions: Record<string, unknown>;

  constructor(
    code: ErrorCode,
    detail?: string,
    options: {
      headers?: Record<string, string>;
      extensions?: Record<string, unknown>;
      status?: number;
    } = {},
  ) {
    const entry = CATALOGUE[code];
    const base = new (constructors.get(code) as FastifyErrorConstructor)(detail ?? entry.title);
    super(base.message);
    this.name = 'HttpProblem';
    this.code = code;
    this.status = options.status ?? entry.status;
    this.headers = options.headers ?? {};
    this.extensions = options.extensions ?? {};
  }

  /** The problem document; `instance` is the request path. Never carries internals. */
  toDocument(instance?: string): ProblemDocument {
    const entry = CATALOGUE[this.code];
    return {
      type: PROBLEM_BASE + entry.type,
      title: entry.title,
      status: this.status,
      detail: this.message,
      ...(instance ? { instance } : {}),
      code: this.code,
      ...this.extensions,
    };
  }
}

/**
 * The shared store (Redis) did not answer: a command timed out, the connection is
 * down, or the circuit breaker is open and refused the command without sending it.
 * Request paths let it reach the error handler, which answers 503 store-unavailable
 * with Retry-After (never a 500, never a wait for the store to come back).
 */
export class StoreUnavailableError extends Error {
  /** Seconds a client should wait before it retries (the breaker's open period). */
  readonly retryAfterSeconds: number;

  constructor(message: string, options: { cause?: unknown; retryAfterSeconds?: number } = {}) {
    super(message, options.cause === undefined ? {} : { cause: options.cause });
    this.name = 'StoreUnavailableError';
    this.retryAfterSeconds = Math.max(1, Math.ceil(options.retryAfterSeconds ?? 1));
  }

  toProblem(): HttpProblem {
    return new HttpProblem(
      'HG_ERR_STORE_UNAVAILABLE',
      'The shared store does not answer. Retry later: with the same Idempotency-Key, the retry starts no second execution.',
      { headers: { 'Retry-After': String(this.retryAfterSeconds) } },
    );
  }
}

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

export function problemType(code: ErrorCode): string {
  return PROBLEM_BASE + CATALOGUE[code].type;
}
