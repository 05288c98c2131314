// The OpenAPI 3.1 `callbacks` of an Async Callback endpoint: the POST the engine sends
// to the caller's callback URL once the execution has finished (runtime/engine/
// callbacks.ts; docs/callbacks.md). Receivers generate their handler and its body type
// from it. The URL comes from the X-Callback-URL header or the callbackUrl query
// parameter, so the callback is declared under both runtime expressions.
import type { ExecutionStatus } from '../engine/ports.ts';

type Json = Record<string, unknown>;

const STATUSES: readonly ExecutionStatus[] = ['succeeded', 'failed'];

/** The Standard Webhooks headers every delivery carries (docs/callbacks.md, "Request"). */
const SIGNATURE_HEADERS: Json[] = [
  {
    name: 'webhook-id',
    in: 'header',
    required: true,
    schema: { type: 'string' },
    description: '`msg_<executionId>`: the same on every retry and re-run; dedupe on it.',
  },
  {
    name: 'webhook-timestamp',
    in: 'header',
    required: true,
    schema: { type: 'string', pattern: '^[0-9]+$' },
    description: 'Seconds since the epoch at this attempt; refuse ones more than 5 minutes away.',
  },
  {
    name: 'webhook-signature',
    in: 'header',
    required: true,
    schema: { type: 'string' },
    description:
      'Space-separated `v1,<base64 HMAC-SHA256>` of `<webhook-id>.<webhook-timestamp>.<body>`, one per active signing secret (the endpoint’s callbackSecretRef, else the cluster’s).',
  },
];

/**
 * The JSON body of a callback, with the endpoint's output schema (a `$ref`) for
 * `output` when it has one.
 */
export function callbackBodySchema(output: Json | undefined): Json {
  return {
    type: 'object',
    description: 'The finished execution: its output when it succeeded, its error when it failed.',
    required: [
      'type',
      'executionId',
      'workflowId',
      'triggerKey',
      'status',
      'createdAt',
      'correlationId',
      'requestId',
    ],
    properties: {
      type: { enum: ['execution.completed', 'execution.failed'] },
      executionId: { type: 'string' },
      workflowId: { type: 'string' },
      triggerKey: { type: 'string', description: '`<namespace>/<name>` of the WebhookTrigger.' },
      status: { enum: [...STATUSES] },
      output: output ?? { description: 'The workflow’s output (succeeded only).' },
      error: {
        type: 'object',
        required: ['message'],
        properties: {
          message: { type: 'string' },
          nodeId: { type: 'string' },
          statusCode: { type: 'integer' },
          code: { type: 'string' },
          kind: { type: 'string' },
        },
      },
      createdAt: { type: 'string', format: 'date-time' },
      startedAt: { type: 'string', format: 'date-time' },
      finishedAt: { type: 'string', format: 'date-time' },
      correlationId: { type: 'string' },
      requestId: { type: 'string' },
    },
    additionalProperties: false,
  };
}

/** The operation's `callbacks`, the body a `$ref` to the endpoint's callback schema. */
export function callbacksOf(body: Json): Json {
  const post = {
    summary: 'The execution’s result, POSTed once it has finished',
    description:
      'Signed per Standard Webhooks. Answer 2xx to acknowledge; 429 and 5xx (and network errors, timeouts) are retried with backoff, honouring Retry-After; 410 and other 4xx stop the deliveries. At least once: dedupe on webhook-id.',
    parameters: SIGNATURE_HEADERS,
    requestBody: { required: true, content: { 'application/json': { schema: body } } },
    responses: {
      '2XX': { description: 'Delivered.' },
      '410': { description: 'Gone: no more attempts.' },
      '429': { description: 'Retried later (Retry-After honoured).' },
      '5XX': { description: 'Retried later.' },
    },
  };
  return {
    executionResult: {
      '{$request.header.X-Callback-URL}': { post },
      '{$request.query.callbackUrl}': { post },
    },
  };
}
