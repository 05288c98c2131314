// Signed deliveries for the signature tests: routes, trigger manifests, and signatures
// made the way each sender documents it, with node:crypto directly (never with the gateway's own code).
import { createHmac } from 'node:crypto';
import type { SignatureAuth } from '../../api/v1alpha1/index.ts';
import type { RouteRecord } from '../../api/records/records.ts';
import { makeRoute } from '../gateway-security/fixtures.ts';
import { trigger } from '../support/manifests.ts';

export function signedRoute(
  signature: Partial<SignatureAuth> & Pick<SignatureAuth, 'preset'>,
  secrets: Record<string, string>,
  key = 'shop/orders',
): RouteRecord {
  return makeRoute(
    {
      auth: {
        method: 'signature',
        signature: {
          secretRef: { name: 'hook-secret' },
          toleranceSeconds: 300,
          rejectReplays: true,
          ...signature,
        },
      },
    },
    { signingSecrets: Object.entries(secrets).map(([k, secret]) => ({ key: k, secret })) },
    key,
  );
}

/**
 * A WebhookTrigger manifest (path segment: its name) that starts `workflowName` for
 * deliveries signed as `signature` says; `spec` adds or overrides fields.
 */
export function signedTrigger(
  name: string,
  workflowName: string,
  signature: Partial<SignatureAuth> & Pick<SignatureAuth, 'preset' | 'secretRef'>,
  spec: Record<string, unknown> = {},
) {
  return trigger(name, {
    workflowRef: { name: workflowName },
    pathSegment: name,
    auth: { method: 'signature', signature },
    ...spec,
  });
}

export const hmac = (
  algorithm: 'sha1' | 'sha256' | 'sha512',
  key: string | Buffer,
  data: string | Buffer,
) => createHmac(algorithm, key).update(data).digest();

/** GitHub: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>`. */
export const githubSignature = (secret: string, body: string | Buffer) =>
  `sha256=${hmac('sha256', secret, body).toString('hex')}`;

/** Stripe: `Stripe-Signature: t=<ts>,v1=<hex HMAC-SHA256(secret, "<ts>.<body>")>`. */
export const stripeV1 = (secret: string, t: number, body: string) =>
  hmac('sha256', secret, `${t}.${body}`).toString('hex');

/** Slack: `X-Slack-Signature: v0=<hex HMAC-SHA256(secret, "v0:<ts>:<body>")>`. */
export const slackSignature = (secret: string, ts: number | string, body: string) =>
  `v0=${hmac('sha256', secret, `v0:${ts}:${body}`).toString('hex')}`;

/** Shopify: `X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256(secret, body)>`. */
export const shopifySignature = (secret: string, body: string) =>
  hmac('sha256', secret, body).toString('base64');
