// The live stream shows a request's headers with its credentials masked. Send Test
// Request sends the saved API key in spec.testCredentials.header, which the CRD lets
// differ from auth.apiKey.header: the gateway then answers 401 (the spec's "header name
// differs from configuration"), and the live stream, which shows refused requests too,
// showed the saved key in clear to whoever watched the endpoint.
import type { FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import type { WebhookTriggerSpec } from '../../api/v1alpha1/index.ts';
import { LiveEventHub } from '../../runtime/gateway/live-events.ts';
import { makeRoute } from './fixtures.ts';

const KEY = 'saved-test-key-0123456789';

function shown(spec: Partial<WebhookTriggerSpec>, headers: Record<string, string>) {
  const route = makeRoute(spec);
  const hub = new LiveEventHub({ gateway: 'g' });
  const seen: { headers: Record<string, string> }[] = [];
  hub.subscribe(route.key, (kind, data) => {
    if (kind === 'request') seen.push(data as (typeof seen)[number]);
  });
  const request = { method: 'POST', url: route.path, headers } as unknown as FastifyRequest;
  hub.publishRequest(route, request, { requestId: 'r', correlationId: 'c', arrivedAt: 0 });
  return seen[0]?.headers;
}

describe('the live stream of an API key endpoint', () => {
  const apiKey = { header: 'X-Gateway-Key', secretRef: { name: 'keys' } };
  const saved = {
    type: 'apiKey' as const,
    header: 'X-Test-Key',
    secretRef: { name: 'keys', key: 'test' },
  };

  it('masks the saved test key in its own header, as it masks the endpoint’s key header', () => {
    const headers = shown(
      { auth: { method: 'apiKey', apiKey }, testCredentials: saved },
      { 'x-test-key': KEY, 'x-gateway-key': KEY, 'content-type': 'application/json' },
    );
    expect(headers?.['x-test-key']).toBe('[redacted]');
    expect(headers?.['x-gateway-key']).toBe('[redacted]');
    expect(headers?.['content-type']).toBe('application/json');
    expect(JSON.stringify(headers)).not.toContain(KEY);
  });

  it('leaves a header alone that holds no credential of the endpoint', () => {
    const headers = shown({ auth: { method: 'apiKey', apiKey } }, { 'x-test-key': 'visible' });
    expect(headers?.['x-test-key']).toBe('visible');
  });
});
