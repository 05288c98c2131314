// Signed deliveries (auth.method: signature): the sender signs each delivery with a
// shared secret, as GitHub, Stripe, Slack, Shopify and every Standard Webhooks sender
// (Svix, ...) do. A preset names the sender's documented scheme and needs nothing but
// the Secret; `generic` describes any other HMAC scheme field by field. How each scheme
// is checked: docs/signatures/.
import { Type, type Static } from '@sinclair/typebox';
import { literals, SecretKeyRef, withRules } from './common.ts';
import { HeaderName, MAX_LENGTH } from './bounds.ts';

export const SIGNATURE_PRESETS = [
  'github',
  'stripe',
  'slack',
  'shopify',
  'standardWebhooks',
  'generic',
] as const;
export type SignaturePreset = (typeof SIGNATURE_PRESETS)[number];

export const HMAC_ALGORITHMS = ['sha1', 'sha256', 'sha512'] as const;
export type HmacAlgorithm = (typeof HMAC_ALGORITHMS)[number];

export const SIGNATURE_ENCODINGS = ['hex', 'base64'] as const;
export type SignatureEncoding = (typeof SIGNATURE_ENCODINGS)[number];

/** Active secrets at most: each is tried on every delivery. */
export const MAX_SIGNING_SECRETS = 16;

/**
 * A Secret whose keys hold HMAC signing secrets: the listed keys, or every key. Used
 * for the secrets senders sign deliveries with (auth.signature) and the ones the
 * gateway signs Async Callbacks with (response.callbackSecretRef).
 */
export function signingSecretsRef(keysDescription: string, description: string) {
  return Type.Object(
    {
      name: SecretKeyRef.properties.name,
      keys: Type.Optional(
        Type.Array(
          Type.String({
            minLength: 1,
            maxLength: MAX_LENGTH.subdomain,
            description: 'A key of the Secret holding an active signing secret.',
          }),
          {
            minItems: 1,
            maxItems: MAX_SIGNING_SECRETS,
            description: keysDescription,
            'x-kubernetes-list-type': 'set',
          },
        ),
      ),
    },
    { additionalProperties: false, description },
  );
}

/** What a generic signed payload may contain: literal text and these three placeholders. */
export const SIGNED_PAYLOAD_PATTERN = '^[^{}]*(\\{(id|timestamp|body)\\}[^{}]*)*$';

export const GenericSignature = withRules(
  Type.Object(
    {
      header: HeaderName({
        description: 'Request header that carries the signature, e.g. X-Signature.',
      }),
      algorithm: literals(HMAC_ALGORITHMS, {
        default: 'sha256',
        description: 'HMAC hash function: sha1, sha256 or sha512.',
      }),
      encoding: literals(SIGNATURE_ENCODINGS, {
        default: 'hex',
        description: 'How the signature is written in the header: hex or base64.',
      }),
      prefix: Type.String({
        default: '',
        maxLength: 64,
        description:
          'Text before the signature in the header, e.g. `sha256=`; compared exactly (case-sensitive).',
      }),
      signedPayload: Type.String({
        default: '{body}',
        minLength: 6,
        maxLength: 256,
        pattern: SIGNED_PAYLOAD_PATTERN,
        description:
          'What is signed: a template of literal text and the placeholders {body} (the raw body bytes, required), {timestamp} (the timestampHeader value) and {id} (the idHeader value), e.g. `{timestamp}.{body}` or `v1:{id}:{timestamp}:{body}`.',
      }),
      timestampHeader: Type.Optional(
        HeaderName({
          description:
            'Header with the delivery time in Unix seconds; it must be signed ({timestamp} in signedPayload). Deliveries outside toleranceSeconds are refused.',
        }),
      ),
      idHeader: Type.Optional(
        HeaderName({
          description:
            'Header with the delivery id; a repeated id is refused as a replay for toleranceSeconds.',
        }),
      ),
    },
    { additionalProperties: false, description: 'A generic HMAC signature scheme.' },
  ),
  [
    {
      rule: "self.signedPayload.contains('{body}')",
      message: 'signedPayload must contain {body}',
      fieldPath: '.signedPayload',
      reason: 'FieldValueInvalid',
    },
    {
      rule: "has(self.timestampHeader) == self.signedPayload.contains('{timestamp}')",
      message: 'signedPayload contains {timestamp} exactly when timestampHeader is set',
      fieldPath: '.timestampHeader',
      reason: 'FieldValueInvalid',
    },
    {
      rule: "has(self.idHeader) || !self.signedPayload.contains('{id}')",
      message: 'signedPayload contains {id}: idHeader is required',
      fieldPath: '.idHeader',
      reason: 'FieldValueRequired',
    },
  ],
);
export type GenericSignature = Static<typeof GenericSignature>;

export const SignatureAuth = withRules(
  Type.Object(
    {
      preset: literals(SIGNATURE_PRESETS, {
        description:
          "The sender's scheme: github (X-Hub-Signature-256), stripe (Stripe-Signature), slack (X-Slack-Signature), shopify (X-Shopify-Hmac-Sha256), standardWebhooks (webhook-signature; Svix and other Standard Webhooks senders) or generic (described in `generic`).",
      }),
      secretRef: signingSecretsRef(
        'The keys of the Secret that hold active signing secrets. Omitted: every key of the Secret is one. A delivery signed with any of them is accepted (rotation without downtime).',
        'Secret holding the signing secrets (standardWebhooks: the `whsec_…` secret as the sender shows it).',
      ),
      toleranceSeconds: Type.Integer({
        minimum: 1,
        maximum: 86400,
        default: 300,
        description:
          'How far a signed timestamp may be from the gateway clock, either way (stripe, slack, standardWebhooks, generic with timestampHeader); also how long delivery ids are remembered to refuse replays.',
      }),
      rejectReplays: Type.Boolean({
        default: true,
        description:
          'Refuse a delivery whose id (or, without an id, whose signature) was already accepted within the tolerance window.',
      }),
      generic: Type.Optional(GenericSignature),
    },
    {
      additionalProperties: false,
      description: 'Signed deliveries: an HMAC of the exact raw body made with a shared secret.',
    },
  ),
  [
    {
      rule: "(self.preset == 'generic') == has(self.generic)",
      message: 'signature.generic is required with preset generic, and only then',
      fieldPath: '.generic',
      reason: 'FieldValueInvalid',
    },
  ],
);
export type SignatureAuth = Static<typeof SignatureAuth>;
