// The live event stream of an Async Callback endpoint shows its requests without the
// callback URL (header or query parameter), as the stored request does: the URL often
// carries the receiver's token, and whoever may watch the endpoint is not its caller.
import type { FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import type { RouteRecord } from '../../api/records/records.ts';
import { LiveEventHub } from '../../runtime/gateway/live-events.ts';

const route = (mode: string) =>
  ({ key: 'default/cb', path: '/webhook/x/cb', spec: { response: { mode } } }) as RouteRecord;

function watched(mode: string, url: string, headers: Record<string, string>) {
  const hub = new LiveEventHub({ gateway: 'g' });
  const seen: { headers: Record<string, string>; query: string }[] = [];
  hub.subscribe('default/cb', (kind, data) => {
    if (kind === 'request') seen.push(data as (typeof seen)[number]);
  });
  const request = { method: 'POST', url, headers } as unknown as FastifyRequest;
  hub.publishRequest(route(mode), request, { requestId: 'r', correlationId: 'c', arrivedAt: 0 });
  return seen[0];
}

describe('the live stream of an Async Callback endpoint', () => {
  it('shows [redacted] for the callback URL, header and query parameter alike', () => {
    const secret = 'https://receiver.example/hook?token=s3cret';
    const event = watched(
      'asyncCallback',
      `/webhook/x/cb?callbackUrl=${encodeURIComponent(secret)}&n=1`,
      {
        'x-callback-url': secret,
        'content-type': 'application/json',
      },
    );
    expect(event?.headers['x-callback-url']).toBe('[redacted]');
    expect(event?.headers['content-type']).toBe('application/json');
    expect(new URLSearchParams(event?.query).get('callbackUrl')).toBe('[redacted]');
    expect(new URLSearchParams(event?.query).get('n')).toBe('1');
    expect(JSON.stringify(event)).not.toContain('s3cret');
  });

  it('leaves other endpoints’ headers and queries as they came', () => {
    const event = watched('immediateAck', '/webhook/x/cb?callbackUrl=mine', {
      'x-callback-url': 'mine',
    });
    expect(event?.headers['x-callback-url']).toBe('mine');
    expect(event?.query).toBe('callbackUrl=mine');
  });
});
