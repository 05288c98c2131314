// The credentials a trigger's Secrets resolve to: values trimmed alike, whatever the
// method (a Secret made from `echo`'s output, or `kubectl create secret --from-file` of
// a file an editor ended with a newline, carries it into every value).
import { describe, expect, it } from 'vitest';
import { resolveCredentials } from '../../../operator/reconcile/credentials.ts';
import type { WebhookTriggerSpec } from '../../../api/v1alpha1/webhook-trigger.ts';
import type { SecretData } from '../../../operator/sources/ports.ts';

const secret = (name: string, data: Record<string, string>): SecretData => ({
  namespace: 'default',
  name,
  data,
});

function resolve(auth: Record<string, unknown>, data: Record<string, string>) {
  const spec = {
    workflowRef: { name: 'wf' },
    pathSegment: 'x',
    response: { mode: 'immediateAck' },
    auth,
  } as unknown as WebhookTriggerSpec;
  const result = resolveCredentials(spec, (name) =>
    name === 's' ? secret(name, data) : undefined,
  );
  if (!result.ok) throw new Error(result.message);
  return result.credentials;
}

describe('resolveCredentials', () => {
  it('trims an HS* shared secret of a bearer trigger, as it trims API keys and signing secrets', () => {
    const credentials = resolve(
      {
        method: 'bearer',
        bearer: {
          issuer: 'https://issuer.example',
          audiences: ['hooks'],
          algorithms: ['HS256'],
          keySecretRef: { name: 's', key: 'hs' },
        },
      },
      { hs: 'a-shared-secret-of-32-bytes-or-more\n' },
    );
    expect(credentials.jwtKey).toBe('a-shared-secret-of-32-bytes-or-more');
  });

  it('refuses an HS* shared secret shorter than its hash (RFC 7518 §3.2): SecretInvalid naming the minimum', () => {
    const hs = (algorithm: string) => ({
      spec: {
        workflowRef: { name: 'wf' },
        pathSegment: 'x',
        response: { mode: 'immediateAck' },
        auth: {
          method: 'bearer',
          bearer: {
            issuer: 'https://issuer.example',
            audiences: ['hooks'],
            algorithms: [algorithm],
            keySecretRef: { name: 's', key: 'hs' },
          },
        },
      } as unknown as WebhookTriggerSpec,
    });
    for (const [alg, bytes] of [
      ['HS256', 32],
      ['HS384', 48],
      ['HS512', 64],
    ] as const) {
      const get = (value: string) => () => secret('s', { hs: value });
      const short = resolveCredentials(hs(alg).spec, get(`${'k'.repeat(bytes - 1)}\n`));
      expect(short.ok, alg).toBe(false);
      if (short.ok) continue;
      expect(short.reason).toBe('SecretInvalid');
      expect(short.message).toContain(`${bytes} bytes`);
      expect(short.message).toContain('spec.auth.bearer.keySecretRef');
      expect(resolveCredentials(hs(alg).spec, get('k'.repeat(bytes))).ok, alg).toBe(true);
    }
    // A PEM key for RS256 has no such bound here.
    const rs = hs('RS256').spec;
    expect(resolveCredentials(rs, () => secret('s', { hs: 'short' })).ok).toBe(true);
  });

  it('trims the introspection client secret of an OAuth 2.0 trigger', () => {
    const credentials = resolve(
      {
        method: 'oauth2',
        oauth2: {
          introspection: {
            url: 'https://idp.example/introspect',
            clientId: 'hookgate',
            clientSecretRef: { name: 's', key: 'cs' },
          },
        },
      },
      { cs: '  client-secret\r\n' },
    );
    expect(credentials.introspectionClientSecret).toBe('client-secret');
  });
});
