// WebhookTrigger authentication: API keys, JWT bearer tokens, OAuth 2.0, signed
// deliveries (HMAC signatures, webhook-trigger-signature.ts), and the credentials the
// Send Test Request operation uses.
import { Type } from '@sinclair/typebox';
import { SecretKeyRef, literals, withRules } from './common.ts';
import { HeaderName, HttpsUrl, MAX_LENGTH } from './bounds.ts';
import { SignatureAuth } from './webhook-trigger-signature.ts';

export * from './webhook-trigger-signature.ts';

export const AUTH_METHODS = ['none', 'apiKey', 'bearer', 'oauth2', 'signature'] as const;
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

/**
 * The shortest shared secret of each HMAC algorithm, in bytes (UTF-8): the size of its
 * hash output. RFC 7518 §3.2 says MUST, RFC 8725 §3.5 says why: one token signed with a
 * short or memorable secret is enough to find it offline, and then to forge any token.
 */
export const HMAC_MIN_SECRET_BYTES: Readonly<Record<string, number>> = {
  HS256: 32,
  HS384: 48,
  HS512: 64,
};

/**
 * Why `secret` cannot be the shared secret of `algorithm`, or undefined when it can (or
 * the algorithm is not an HMAC one). The operator refuses such a Secret (SecretInvalid),
 * the gateway such a key (503): a trigger admitted before the rule verifies nothing.
 */
export function weakHmacSecret(algorithm: string, secret: string): string | undefined {
  const minimum = HMAC_MIN_SECRET_BYTES[algorithm];
  if (minimum === undefined) return undefined;
  const bytes = Buffer.byteLength(secret, 'utf8');
  if (bytes >= minimum) return undefined;
  return `an ${algorithm} shared secret must be at least ${minimum} bytes (it has ${bytes}; RFC 7518 §3.2): make one with \`openssl rand -base64 ${minimum}\``;
}

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
          maxLength: MAX_LENGTH.subdomain,
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

/** The JWT `typ` header a token must carry (jose compares it as RFC 8725 says). */
const requiredType = (description: string) =>
  Type.Optional(Type.String({ maxLength: 64, description }));

/**
 * A JWKS (jwksUrl) serves public keys: an HS* token can never verify with it (jose
 * refuses a shared secret from a remote key set), so every such token was a 401
 * "malformed". Refused at admission instead; `hint` names what to use.
 */
const noHmacWithJwks = (hint: string) => ({
  rule: "!has(self.jwksUrl) || !self.algorithms.exists(a, a.startsWith('HS'))",
  message: `HS256, HS384 and HS512 are not verified with a JWKS (jwksUrl holds public keys): ${hint}`,
  fieldPath: '.algorithms',
  reason: 'FieldValueInvalid' as const,
});

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
  noHmacWithJwks(
    'use an asymmetric algorithm (RS*, PS*, ES*, EdDSA), or a shared secret in keySecretRef',
  ),
];

export const ApiKeyAuth = Type.Object(
  {
    header: HeaderName({
      default: 'X-API-Key',
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
      requiredType: requiredType(
        'Required JWT `typ` header, e.g. at+jwt for RFC 9068 access tokens.',
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
      requiredType: requiredType(
        'Required JWT `typ` header of the access tokens (jwksUrl), e.g. at+jwt for RFC 9068 access tokens: an ID token is then refused. Not with introspection (opaque tokens have no header).',
      ),
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
                  maxLength: MAX_LENGTH.subdomain,
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
    {
      rule: '!has(self.requiredType) || has(self.jwksUrl)',
      message: 'requiredType applies to JWT access tokens (jwksUrl), not to introspection',
      fieldPath: '.requiredType',
      reason: 'FieldValueForbidden',
    },
    noHmacWithJwks('use an asymmetric algorithm (RS*, PS*, ES*, EdDSA)'),
  ],
);

export const AuthSpec = withRules(
  Type.Object(
    {
      method: literals(AUTH_METHODS, {
        default: 'none',
        description:
          'The spec’s "require authentication" toggle and method: none (off), apiKey (X-API-Key), bearer (JWT), oauth2 (scopes) or signature (deliveries signed with a shared secret: GitHub, Stripe, Slack, Shopify, Standard Webhooks or a generic HMAC).',
      }),
      apiKey: Type.Optional(ApiKeyAuth),
      bearer: Type.Optional(BearerAuth),
      oauth2: Type.Optional(OAuth2Auth),
      signature: Type.Optional(SignatureAuth),
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
    {
      rule: "self.method != 'signature' || has(self.signature)",
      message: 'auth.signature is required when auth.method is signature',
      fieldPath: '.signature',
      reason: 'FieldValueRequired',
    },
  ],
);

export const TestCredentials = Type.Object(
  {
    type: literals(['apiKey', 'bearer', 'oauth2'] as const, {
      description: 'Credential type; must match auth.method.',
    }),
    header: HeaderName({
      default: 'X-API-Key',
      description: 'For apiKey: the header the key is sent in.',
    }),
    secretRef: Type.Object(
      {
        name: SecretKeyRef.properties.name,
        key: Type.String({
          minLength: 1,
          maxLength: MAX_LENGTH.subdomain,
          description: 'Key inside the Secret.',
        }),
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
