// WebhookTrigger: one HTTP endpoint that starts executions of a Workflow.
import { Type, type Static } from '@sinclair/typebox';
import {
  Conditions,
  DURATION_PATTERN,
  SecretKeyRef,
  literals,
  withRules,
  type Resource,
} from './common.ts';

export const WEBHOOK_TRIGGER_KIND = 'WebhookTrigger';
export const WEBHOOK_TRIGGER_PLURAL = 'webhooktriggers';

export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

/** The predefined path segments of the spec; any other valid segment is a custom one. */
export const PRESET_PATH_SEGMENTS = ['default', 'trigger', 'ingest', 'callback', 'notify'] as const;

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

export const AUTH_METHODS = ['none', 'apiKey', 'bearer', 'oauth2'] as const;
export type AuthMethod = (typeof AUTH_METHODS)[number];

export const JWT_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'HS256',
  'HS384',
  'HS512',
] as const;

export const FIELD_TYPES = ['string', 'number', 'integer', 'boolean', 'object', 'array'] as const;

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

const SEGMENT = '(?:[A-Za-z0-9][A-Za-z0-9._~-]{0,62}|:[A-Za-z][A-Za-z0-9_]{0,62})';
export const PATH_SEGMENT_PATTERN = `^${SEGMENT}(?:/${SEGMENT}){0,7}$`;

const HttpsUrl = (description: string) =>
  Type.String({ pattern: '^https?://[^\\s]+$', maxLength: 2048, description });

// Fields shared by Bearer (JWT) and OAuth 2.0 token verification.
const tokenVerificationFields = {
  issuer: Type.String({
    minLength: 1,
    maxLength: 2048,
    description: 'Required `iss` claim, compared exactly.',
  }),
  audiences: Type.Array(
    Type.String({ minLength: 1, maxLength: 2048, description: 'An accepted audience.' }),
    {
      minItems: 1,
      maxItems: 16,
      description: 'Accepted `aud` values: the token must name at least one of them.',
    },
  ),
  jwksUrl: Type.Optional(
    HttpsUrl(
      'URL of the JSON Web Key Set used to verify tokens (keys are looked up by `kid`; `jku`/`x5u` are ignored).',
    ),
  ),
  keySecretRef: Type.Optional(
    Type.Object(
      {
        name: SecretKeyRef.properties.name,
        key: Type.String({
          minLength: 1,
          maxLength: 253,
          description:
            'Key inside the Secret holding a PEM public key, a JWK (JSON) or, for HS*, the shared secret.',
        }),
      },
      { additionalProperties: false, description: 'A static verification key from a Secret.' },
    ),
  ),
  algorithms: Type.Array(literals(JWT_ALGORITHMS, { description: 'A JWS algorithm.' }), {
    minItems: 1,
    maxItems: 13,
    default: ['RS256'],
    description:
      'Allowed signing algorithms. The token header never chooses; `none` is never accepted. With keySecretRef exactly one algorithm is allowed.',
    'x-kubernetes-list-type': 'set',
  }),
  clockToleranceSeconds: Type.Integer({
    minimum: 0,
    maximum: 300,
    default: 30,
    description: 'Allowed clock skew when checking exp and nbf.',
  }),
};

const keySourceRules = [
  {
    rule: 'has(self.jwksUrl) != has(self.keySecretRef)',
    message: 'exactly one of jwksUrl and keySecretRef must be set',
    reason: 'FieldValueInvalid' as const,
  },
  {
    rule: '!has(self.keySecretRef) || size(self.algorithms) == 1',
    message: 'a static key (keySecretRef) allows exactly one algorithm',
    fieldPath: '.algorithms',
    reason: 'FieldValueInvalid' as const,
  },
];

export const ApiKeyAuth = Type.Object(
  {
    header: Type.String({
      default: 'X-API-Key',
      pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$",
      description: 'Request header that carries the key.',
    }),
    secretRef: Type.Object(
      { name: SecretKeyRef.properties.name },
      {
        additionalProperties: false,
        description:
          'Secret holding the accepted keys: each key of the Secret is a consumer id, each value that consumer’s API key.',
      },
    ),
  },
  { additionalProperties: false, description: 'API key authentication.' },
);

export const BearerAuth = withRules(
  Type.Object(
    {
      ...tokenVerificationFields,
      requiredType: Type.Optional(
        Type.String({
          maxLength: 64,
          description: 'Required JWT `typ` header, e.g. at+jwt for RFC 9068 access tokens.',
        }),
      ),
    },
    {
      additionalProperties: false,
      description: 'Bearer token authentication with JWTs (Authorization: Bearer <token>).',
    },
  ),
  keySourceRules,
);

export const OAuth2Auth = withRules(
  Type.Object(
    {
      issuer: tokenVerificationFields.issuer,
      audiences: tokenVerificationFields.audiences,
      jwksUrl: tokenVerificationFields.jwksUrl,
      algorithms: tokenVerificationFields.algorithms,
      clockToleranceSeconds: tokenVerificationFields.clockToleranceSeconds,
      introspection: Type.Optional(
        Type.Object(
          {
            url: HttpsUrl('RFC 7662 token introspection endpoint of the OAuth provider.'),
            clientId: Type.String({
              minLength: 1,
              maxLength: 256,
              description: 'Client id used to call the endpoint.',
            }),
            clientSecretRef: Type.Object(
              {
                name: SecretKeyRef.properties.name,
                key: Type.String({
                  minLength: 1,
                  maxLength: 253,
                  description: 'Key inside the Secret.',
                }),
              },
              { additionalProperties: false, description: 'Secret key holding the client secret.' },
            ),
            cacheSeconds: Type.Integer({
              minimum: 0,
              maximum: 3600,
              default: 60,
              description:
                'How long an introspection answer is cached (never longer than the token lives).',
            }),
          },
          { additionalProperties: false, description: 'Opaque-token validation by introspection.' },
        ),
      ),
      requiredScopes: Type.Array(
        Type.String({
          minLength: 1,
          maxLength: 256,
          pattern: '^[\\x21\\x23-\\x5B\\x5D-\\x7E]+$',
          description: 'A scope (RFC 6749 scope-token).',
        }),
        {
          default: [],
          maxItems: 32,
          description: 'Scopes the token must all carry (the `scope` claim is space-separated).',
          'x-kubernetes-list-type': 'set',
        },
      ),
    },
    {
      additionalProperties: false,
      description:
        'OAuth 2.0 access tokens with scope-based access control: JWT access tokens (jwksUrl) or introspection.',
    },
  ),
  [
    {
      rule: 'has(self.jwksUrl) != has(self.introspection)',
      message: 'exactly one of jwksUrl and introspection must be set',
      reason: 'FieldValueInvalid',
    },
  ],
);

export const AuthSpec = withRules(
  Type.Object(
    {
      method: literals(AUTH_METHODS, {
        default: 'none',
        description:
          'The spec’s "require authentication" toggle and method: none (off), apiKey (X-API-Key), bearer (JWT) or oauth2 (scopes).',
      }),
      apiKey: Type.Optional(ApiKeyAuth),
      bearer: Type.Optional(BearerAuth),
      oauth2: Type.Optional(OAuth2Auth),
    },
    { additionalProperties: false, description: 'Authentication of callers.' },
  ),
  [
    {
      rule: "self.method != 'apiKey' || has(self.apiKey)",
      message: 'auth.apiKey is required when auth.method is apiKey',
      fieldPath: '.apiKey',
      reason: 'FieldValueRequired',
    },
    {
      rule: "self.method != 'bearer' || has(self.bearer)",
      message: 'auth.bearer is required when auth.method is bearer',
      fieldPath: '.bearer',
      reason: 'FieldValueRequired',
    },
    {
      rule: "self.method != 'oauth2' || has(self.oauth2)",
      message: 'auth.oauth2 is required when auth.method is oauth2',
      fieldPath: '.oauth2',
      reason: 'FieldValueRequired',
    },
  ],
);

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
      allowedHeaders: Type.Array(
        Type.String({
          pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$",
          description: 'A header name.',
        }),
        {
          default: [],
          maxItems: 64,
          description:
            'Request headers a browser may send, beyond the CORS-safelisted ones and the auth header.',
          'x-kubernetes-list-type': 'set',
        },
      ),
      exposedHeaders: Type.Array(
        Type.String({
          pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$",
          description: 'A header name.',
        }),
        {
          default: [],
          maxItems: 64,
          description: 'Response headers a browser script may read.',
          'x-kubernetes-list-type': 'set',
        },
      ),
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

export const SchemaField = Type.Object(
  {
    name: Type.String({
      minLength: 1,
      maxLength: 128,
      pattern: '^[A-Za-z_][A-Za-z0-9_.-]*$',
      description: 'Field identifier (a top-level property of the JSON body).',
    }),
    description: Type.Optional(
      Type.String({ maxLength: 1024, description: 'Human-readable purpose.' }),
    ),
    type: literals(FIELD_TYPES, { description: 'JSON type of the field.' }),
    value: Type.Optional(
      Type.Unknown({
        description: 'Default or example value used for testing.',
        'x-kubernetes-preserve-unknown-fields': true,
      }),
    ),
    required: Type.Boolean({
      default: false,
      description: 'Whether requests must carry the field.',
    }),
  },
  { additionalProperties: false, description: 'One field of the input or output schema.' },
);
export type SchemaField = Static<typeof SchemaField>;

const fieldList = (description: string) =>
  Type.Array(SchemaField, {
    maxItems: 256,
    description,
    'x-kubernetes-list-type': 'map',
    'x-kubernetes-list-map-keys': ['name'],
  });

const ioFields = (what: string) => ({
  fields: Type.Optional(fieldList(`Manually defined ${what} fields.`)),
  jsonSchema: Type.Optional(
    Type.String({
      maxLength: 65536,
      description: `Automatic IO: the ${what} JSON Schema as JSON text (inferred from the example when omitted).`,
    }),
  ),
  example: Type.Optional(
    Type.String({
      maxLength: 65536,
      description: `Automatic IO: an example ${what} document as JSON text.`,
    }),
  ),
});

export const InputSchema = Type.Object(
  {
    source: Type.Optional(
      Type.String({
        maxLength: 253,
        description:
          'IO source: where the input comes from (a predefined source, custom data source or data model).',
      }),
    ),
    ...ioFields('input'),
  },
  { additionalProperties: false, description: 'The input schema.' },
);

export const OutputSchema = Type.Object(
  {
    asset: Type.Optional(
      Type.String({ maxLength: 253, description: 'IO asset: the output destination or format.' }),
    ),
    ...ioFields('output'),
  },
  { additionalProperties: false, description: 'The output schema.' },
);

export const SchemaSpec = withRules(
  Type.Object(
    {
      mode: literals(['manual', 'automatic'] as const, {
        default: 'manual',
        description:
          'manual: fields are defined by hand; automatic: schemas come from JSON Schema text or examples.',
      }),
      input: Type.Optional(InputSchema),
      output: Type.Optional(OutputSchema),
    },
    { additionalProperties: false, description: 'Input and output schemas of the endpoint.' },
  ),
  [
    {
      rule: "self.mode != 'automatic' || (has(self.input) && has(self.output))",
      message: 'Please provide both input and output schemas for automatic IO mode.',
      reason: 'FieldValueRequired',
    },
  ],
);
export type SchemaSpec = Static<typeof SchemaSpec>;

const HEADER_NAME_PATTERN = "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$";

export const CustomHeader = withRules(
  Type.Object(
    {
      name: Type.String({
        pattern: HEADER_NAME_PATTERN,
        description: 'Header name (an HTTP token).',
      }),
      value: Type.String({
        maxLength: 4096,
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
  ],
);
export type ResponseSpec = Static<typeof ResponseSpec>;

export const TestCredentials = Type.Object(
  {
    type: literals(['apiKey', 'bearer', 'oauth2'] as const, {
      description: 'Credential type; must match auth.method.',
    }),
    header: Type.String({
      default: 'X-API-Key',
      pattern: HEADER_NAME_PATTERN,
      description: 'For apiKey: the header the key is sent in.',
    }),
    secretRef: Type.Object(
      {
        name: SecretKeyRef.properties.name,
        key: Type.String({ minLength: 1, maxLength: 253, description: 'Key inside the Secret.' }),
      },
      {
        additionalProperties: false,
        description: 'Secret key holding the API key or token used by test requests.',
      },
    ),
  },
  {
    additionalProperties: false,
    description: 'Credentials saved for the Send Test Request operation.',
  },
);

export const WebhookTriggerSpec = withRules(
  Type.Object(
    {
      workflowRef: Type.Object(
        {
          name: Type.String({
            minLength: 1,
            maxLength: 253,
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
      Type.String({ description: 'Identifier of the workflow this endpoint starts.' }),
    ),
    basePath: Type.Optional(Type.String({ description: 'Base path: /webhook/<workflowId>.' })),
    url: Type.Optional(
      Type.String({ description: 'Generated webhook URL: <base URL><basePath>/<pathSegment>.' }),
    ),
    conditions: Type.Optional(Conditions),
  },
  { additionalProperties: false, description: 'Observed state of the WebhookTrigger.' },
);
export type WebhookTriggerStatus = Static<typeof WebhookTriggerStatus>;

export type WebhookTrigger = Resource<WebhookTriggerSpec, WebhookTriggerStatus>;
