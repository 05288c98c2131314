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
 * Response headers a trigger (`response.headers.custom`) or a respond node may not set:
 * framing and hop-by-hop headers (they would corrupt the HTTP exchange), the content
 * type (`response.contentType`), and what a browser keeps for the whole origin, which
 * every trigger on the gateway shares: cookies, HSTS, alternative services, a Network
 * Error Logging or Reporting policy (it would report other endpoints' requests, their
 * URLs and execution-link tokens, to the trigger's collector), Clear-Site-Data, and a
 * service worker scope wider than the worker script's own path. CORS headers
 * (`access-control-*`, owned by `spec.cors`) are refused by prefix.
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
  'alt-svc',
  'nel',
  'report-to',
  'reporting-endpoints',
  'clear-site-data',
  'service-worker-allowed',
] as const;

/**
 * A header value HTTP can carry (RFC 9110 field-value: visible ASCII, space, tab and
 * obs-text, U+0080 to U+00FF); Node refuses anything else when the answer is written.
 */
export const HEADER_VALUE_PATTERN = '^[\\t\\x20-\\x7e\\x80-\\xff]*$';

const FORBIDDEN_NAMES = new Set<string>(FORBIDDEN_RESPONSE_HEADERS);
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const FIELD_VALUE = new RegExp(HEADER_VALUE_PATTERN);

/**
 * Whether a trigger or a respond node may set this response header: an HTTP token for
 * a name that is not forbidden, a value HTTP can carry. Admission checks the trigger's
 * headers; the gateway checks both again before setting them (a record admitted by an
 * older CRD, a respond node's headers, which admission does not check by name).
 */
export function settableResponseHeader(name: string, value: unknown): value is string {
  if (typeof value !== 'string' || !TOKEN.test(name) || !FIELD_VALUE.test(value)) return false;
  const lower = name.toLowerCase();
  return !FORBIDDEN_NAMES.has(lower) && !lower.startsWith('access-control-');
}

/**
 * Why settableResponseHeader refuses a header, in words for its author (the operator's
 * condition and `hookgate validate`); undefined when it allows it. Off the request path.
 */
export function responseHeaderRefusal(name: string, value: unknown): string | undefined {
  if (settableResponseHeader(name, value)) return undefined;
  const lower = name.toLowerCase();
  if (!TOKEN.test(name)) return 'the name is not an HTTP token';
  if (lower === 'content-type') return "the trigger's response.contentType sets the content type";
  if (lower.startsWith('access-control-')) return "the trigger's spec.cors sets CORS headers";
  if (FORBIDDEN_NAMES.has(lower)) {
    return 'framing, hop-by-hop, cookie and origin-wide headers (HSTS, Alt-Svc, NEL, Report-To, Reporting-Endpoints, Clear-Site-Data, Service-Worker-Allowed) cannot be set by a workflow';
  }
  return 'the value has a character HTTP cannot carry (a control character, or one past U+00FF)';
}

export const CustomHeader = withRules(
  Type.Object(
    {
      name: HeaderName({ description: 'Header name (an HTTP token).' }),
      value: Type.String({
        maxLength: MAX_LENGTH.headerValue,
        pattern: HEADER_VALUE_PATTERN,
        description:
          'Header value: visible ASCII, spaces, tabs and U+0080 to U+00FF (no CR, LF or other control characters).',
      }),
    },
    { additionalProperties: false, description: 'A custom response header.' },
  ),
  [
    {
      rule: `!(self.name.lowerAscii() in [${FORBIDDEN_RESPONSE_HEADERS.map((h) => `'${h}'`).join(', ')}]) && !self.name.lowerAscii().startsWith('access-control-')`,
      message:
        'framing, hop-by-hop, cookie, content-type, CORS and origin-wide headers (HSTS, Alt-Svc, NEL, Report-To, Reporting-Endpoints, Clear-Site-Data, Service-Worker-Allowed) cannot be set here (use response.contentType and cors)',
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
