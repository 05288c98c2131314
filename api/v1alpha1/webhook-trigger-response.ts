// WebhookTrigger response: the response modes, status codes and headers.
import { Type, type Static } from '@sinclair/typebox';
import { literals, withRules } from './common.ts';
import { HeaderName, MAX_LENGTH } from './bounds.ts';
import { signingSecretsRef } from './webhook-trigger-signature.ts';

export const RESPONSE_MODES = [
  'immediateAck',
  'asyncCallback',
  'ackSubscribe',
  'waitForCompletion',
  'sseStream',
  'waitForResponseNode',
] as const;
export type ResponseMode = (typeof RESPONSE_MODES)[number];

/** The status code each response mode answers with unless `response.statusCode` says otherwise. */
export const DEFAULT_STATUS_CODE: Record<ResponseMode, number> = {
  immediateAck: 202,
  asyncCallback: 202,
  ackSubscribe: 202,
  waitForCompletion: 200,
  sseStream: 200,
  waitForResponseNode: 200,
};

/**
 * Response headers a trigger may not set: framing and hop-by-hop headers (they would
 * corrupt the HTTP exchange), cookies, and CORS headers (owned by `spec.cors`).
 */
export const FORBIDDEN_RESPONSE_HEADERS = [
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'proxy-connection',
  'set-cookie',
  'host',
  'content-type',
  'strict-transport-security',
] as const;

export const CustomHeader = withRules(
  Type.Object(
    {
      name: HeaderName({ description: 'Header name (an HTTP token).' }),
      value: Type.String({
        maxLength: MAX_LENGTH.headerValue,
        pattern: '^[^\\r\\n\\x00]*$',
        description: 'Header value (no CR, LF or NUL).',
      }),
    },
    { additionalProperties: false, description: 'A custom response header.' },
  ),
  [
    {
      rule: `!(self.name.lowerAscii() in [${FORBIDDEN_RESPONSE_HEADERS.map((h) => `'${h}'`).join(', ')}]) && !self.name.lowerAscii().startsWith('access-control-')`,
      message:
        'framing, hop-by-hop, cookie, content-type and CORS headers cannot be set here (use response.contentType and cors)',
      fieldPath: '.name',
      reason: 'FieldValueForbidden',
    },
  ],
);

export const ResponseSpec = withRules(
  Type.Object(
    {
      mode: literals(RESPONSE_MODES, {
        description:
          'When and how the caller is answered: immediateAck (202 at once), asyncCallback (202, result POSTed to the caller’s callback URL), ackSubscribe (202 with an event channel), waitForCompletion (200 with the output), sseStream (200 event stream), waitForResponseNode (200 from the first respond node).',
      }),
      statusCode: Type.Optional(
        Type.Integer({
          minimum: 200,
          maximum: 599,
          description:
            'Status code of a successful answer. Omit it to use the mode’s default (202 for immediateAck, asyncCallback and ackSubscribe; 200 otherwise): that is the reset to default. 204 sends no body.',
        }),
      ),
      contentType: Type.String({
        default: 'application/json',
        maxLength: 256,
        pattern:
          '^[a-zA-Z0-9!#$&^_.+-]+/[a-zA-Z0-9!#$&^_.+-]+(\\s*;\\s*[a-zA-Z0-9_-]+=[^\\r\\n;]+)*$',
        description:
          'Content type of the response body: application/json, application/xml, text/plain, text/html or another MIME type.',
      }),
      headers: Type.Object(
        {
          correlationId: Type.Boolean({
            default: true,
            description: 'Send X-Correlation-ID (request tracing).',
          }),
          requestId: Type.Boolean({
            default: true,
            description: 'Send X-Request-ID (this request).',
          }),
          timestamp: Type.Boolean({
            default: false,
            description: 'Send X-Timestamp (response time, RFC 3339).',
          }),
          custom: Type.Array(CustomHeader, {
            default: [],
            maxItems: 32,
            description: 'Additional response headers.',
            'x-kubernetes-list-type': 'map',
            'x-kubernetes-list-map-keys': ['name'],
          }),
        },
        { additionalProperties: false, default: {}, description: 'Response headers.' },
      ),
      callbackSecretRef: Type.Optional(
        signingSecretsRef(
          'The keys of the Secret that hold active callback signing secrets. Omitted: every key of the Secret is one. Every one signs each callback (webhook-signature carries one signature per secret), so receivers can move to a new secret before the old one is removed.',
          'asyncCallback: the Secret whose `whsec_…` secrets (Standard Webhooks) sign this endpoint’s callbacks; give its receivers the same secret. Omitted: the cluster’s callback secret (HOOKGATE_CALLBACK_SECRET_FILE).',
        ),
      ),
    },
    { additionalProperties: false, description: 'How the caller is answered.' },
  ),
  [
    {
      rule: "self.mode != 'sseStream' || !has(self.statusCode) || self.statusCode == 200",
      message: 'an SSE stream is always answered with 200',
      fieldPath: '.statusCode',
      reason: 'FieldValueInvalid',
    },
    {
      rule: "self.mode == 'asyncCallback' || !has(self.callbackSecretRef)",
      message: 'callbackSecretRef signs Async Callbacks: it needs mode asyncCallback',
      fieldPath: '.callbackSecretRef',
      reason: 'FieldValueForbidden',
    },
  ],
);
export type ResponseSpec = Static<typeof ResponseSpec>;
