// WebhookTrigger: one HTTP endpoint that starts executions of a Workflow.
//
// The spec's larger parts live in their own modules (auth, response, input/output
// schema); this module re-exports them, so importers see one WebhookTrigger API.
import { Type, type Static } from '@sinclair/typebox';
import { Conditions, DURATION_PATTERN, literals, withRules, type Resource } from './common.ts';
import { HeaderName, MAX_LENGTH } from './bounds.ts';
import { AuthSpec, TestCredentials } from './webhook-trigger-auth.ts';
import { ResponseSpec } from './webhook-trigger-response.ts';
import { SchemaSpec } from './webhook-trigger-schema.ts';

export * from './webhook-trigger-auth.ts';
export * from './webhook-trigger-response.ts';
export * from './webhook-trigger-schema.ts';

export const WEBHOOK_TRIGGER_KIND = 'WebhookTrigger';
export const WEBHOOK_TRIGGER_PLURAL = 'webhooktriggers';

export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

/** The predefined path segments of the spec; any other valid segment is a custom one. */
export const PRESET_PATH_SEGMENTS = ['default', 'trigger', 'ingest', 'callback', 'notify'] as const;

const SEGMENT = '(?:[A-Za-z0-9][A-Za-z0-9._~-]{0,62}|:[A-Za-z][A-Za-z0-9_]{0,62})';
export const PATH_SEGMENT_PATTERN = `^${SEGMENT}(?:/${SEGMENT}){0,7}$`;

export const RateLimitSpec = Type.Object(
  {
    requestsPerMinute: Type.Integer({
      minimum: 1,
      maximum: 1_000_000,
      description:
        'Requests per minute allowed for this endpoint, shared by all its methods. Omit rateLimit for no limit.',
    }),
    failureMode: literals(['open', 'closed'] as const, {
      default: 'open',
      description:
        'When the limiter store is unreachable: open lets requests through, closed answers 503.',
    }),
    enforce: Type.Boolean({
      default: true,
      description:
        'false: shadow mode. Requests over the limit are let through and counted (hookgate_rate_limit_decisions_total{decision="shadowed"}), without RateLimit headers, to measure a limit before enforcing it.',
    }),
  },
  { additionalProperties: false, description: 'Per-endpoint rate limit.' },
);

export const CorsSpec = withRules(
  Type.Object(
    {
      enabled: Type.Boolean({ default: false, description: 'Whether CORS headers are sent.' }),
      allowedOrigins: Type.Array(
        Type.String({
          pattern: '^(\\*|https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?)$',
          maxLength: 512,
          description:
            'An exact origin (scheme://host[:port]) or * for any origin without credentials.',
        }),
        {
          default: [],
          maxItems: 64,
          description: 'Origins allowed to call the endpoint from a browser, compared exactly.',
          'x-kubernetes-list-type': 'set',
        },
      ),
      allowCredentials: Type.Boolean({
        default: false,
        description: 'Send Access-Control-Allow-Credentials: true (never together with *).',
      }),
      allowedHeaders: Type.Array(HeaderName({ description: 'A header name.' }), {
        default: [],
        maxItems: 64,
        description:
          'Request headers a browser may send, beyond the CORS-safelisted ones and the auth header.',
        'x-kubernetes-list-type': 'set',
      }),
      exposedHeaders: Type.Array(HeaderName({ description: 'A header name.' }), {
        default: [],
        maxItems: 64,
        description: 'Response headers a browser script may read.',
        'x-kubernetes-list-type': 'set',
      }),
      maxAgeSeconds: Type.Integer({
        minimum: 0,
        maximum: 86400,
        default: 600,
        description: 'How long a browser may cache a preflight answer.',
      }),
    },
    {
      additionalProperties: false,
      description: 'Cross-origin resource sharing for browser callers.',
    },
  ),
  [
    {
      rule: '!self.enabled || size(self.allowedOrigins) > 0',
      message: 'cors.allowedOrigins must list at least one origin when CORS is enabled',
      fieldPath: '.allowedOrigins',
      reason: 'FieldValueRequired',
    },
    {
      rule: "!self.allowCredentials || !('*' in self.allowedOrigins)",
      message: 'allowCredentials cannot be combined with the * origin',
      fieldPath: '.allowedOrigins',
      reason: 'FieldValueForbidden',
    },
  ],
);

const InputLimitsSpec = Type.Object(
  {
    maxDepth: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 256,
        description: 'Deepest nesting of objects and arrays in a JSON body (default 64).',
      }),
    ),
    maxKeys: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 1_000_000,
        description: 'Most object members in a JSON body, or fields in a form (default 50000).',
      }),
    ),
    maxStringBytes: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 16 * 1024 * 1024,
        description: 'Longest JSON string in UTF-8 bytes (default 1 MiB).',
      }),
    ),
  },
  {
    additionalProperties: false,
    description:
      'Limits checked before a body is parsed; over a limit the request gets 400. Unset fields keep the defaults.',
  },
);

export const WebhookTriggerSpec = withRules(
  Type.Object(
    {
      workflowRef: Type.Object(
        {
          name: Type.String({
            minLength: 1,
            maxLength: MAX_LENGTH.subdomain,
            pattern: '^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$',
            description: 'Name of the Workflow, in the same namespace.',
          }),
        },
        { additionalProperties: false, description: 'The Workflow this endpoint starts.' },
      ),
      pathSegment: Type.String({
        default: 'default',
        maxLength: 256,
        pattern: PATH_SEGMENT_PATTERN,
        description:
          'Identifies this endpoint under the workflow’s base path: a preset (default, trigger, ingest, callback, notify) or a custom path of up to 8 segments; a segment written :name is a path parameter.',
      }),
      methods: Type.Array(literals(HTTP_METHODS, { description: 'An HTTP method.' }), {
        minItems: 1,
        maxItems: 7,
        default: ['POST'],
        description: 'Enabled HTTP methods; others get 405. Enable only those you need.',
        'x-kubernetes-list-type': 'set',
      }),
      timeout: withRules(
        Type.String({
          default: '30s',
          maxLength: MAX_LENGTH.duration,
          pattern: DURATION_PATTERN,
          description: 'Maximum wait for a response, e.g. 30s, 5m, 1h (at most 1h).',
        }),
        [
          {
            rule: "duration(self) <= duration('1h')",
            message: 'timeout must be at most 1h',
            reason: 'FieldValueInvalid',
          },
        ],
      ),
      requireHttps: Type.Boolean({
        default: false,
        description: 'Refuse requests that did not arrive over HTTPS.',
      }),
      auth: Type.Optional(AuthSpec),
      rateLimit: Type.Optional(RateLimitSpec),
      cors: Type.Optional(CorsSpec),
      maxBodyBytes: Type.Integer({
        minimum: 1,
        maximum: 16 * 1024 * 1024,
        default: 1024 * 1024,
        description: 'Largest accepted request body in bytes; larger bodies get 413.',
      }),
      inputLimits: Type.Optional(InputLimitsSpec),
      schema: Type.Optional(SchemaSpec),
      response: ResponseSpec,
      deploy: Type.Boolean({
        default: true,
        description:
          'The Deploy API action: when true the endpoint is registered with the gateway and reachable.',
      }),
      testCredentials: Type.Optional(TestCredentials),
    },
    { additionalProperties: false, description: 'Desired state of the WebhookTrigger.' },
  ),
  [
    {
      rule: '!has(self.testCredentials) || (has(self.auth) && self.auth.method == self.testCredentials.type)',
      message: 'testCredentials.type must match auth.method',
      fieldPath: '.testCredentials.type',
      reason: 'FieldValueInvalid',
    },
    {
      rule: "self.response.mode != 'sseStream' || !self.methods.exists(m, m == 'HEAD')",
      message: 'HEAD cannot be enabled for an SSE stream endpoint',
      fieldPath: '.methods',
      reason: 'FieldValueInvalid',
    },
  ],
);
export type WebhookTriggerSpec = Static<typeof WebhookTriggerSpec>;

export const WebhookTriggerStatus = Type.Object(
  {
    observedGeneration: Type.Optional(
      Type.Integer({
        minimum: 0,
        description: 'The metadata.generation the status was computed from.',
      }),
    ),
    workflowId: Type.Optional(
      Type.String({
        maxLength: MAX_LENGTH.workflowId,
        description:
          'Identifier of the workflow this endpoint starts: <namespace>_<environment>_<name>.',
      }),
    ),
    basePath: Type.Optional(
      Type.String({
        maxLength: MAX_LENGTH.basePath,
        description: 'Base path: /webhook/<workflowId>.',
      }),
    ),
    url: Type.Optional(
      Type.String({
        maxLength: MAX_LENGTH.webhookUrl,
        description: 'Generated webhook URL: <base URL><basePath>/<pathSegment>.',
      }),
    ),
    conditions: Type.Optional(Conditions),
  },
  { additionalProperties: false, description: 'Observed state of the WebhookTrigger.' },
);
export type WebhookTriggerStatus = Static<typeof WebhookTriggerStatus>;

export type WebhookTrigger = Resource<WebhookTriggerSpec, WebhookTriggerStatus>;
