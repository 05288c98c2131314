// Prometheus down or slow: the analytics API answers a problem (503 or 504) within the
// timeout, never a hang, a 500 or a stack.
import { createServer, type Server, type Socket } from 'node:net';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PrometheusAnalytics } from '../../runtime/analytics/prometheus.ts';
import { analyticsRoutes, problemErrorHandler } from '../../runtime/analytics/routes.ts';

let silent: Server;
const sockets = new Set<Socket>();
let silentPort = 0;
let closedPort = 0;

beforeAll(async () => {
  // Accepts connections and never answers.
  silent = createServer((socket) => sockets.add(socket));
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  silentPort = (silent.address() as { port: number }).port;
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  closedPort = (probe.address() as { port: number }).port;
  await new Promise<void>((r) => probe.close(() => r()));
});
afterAll(() => {
  for (const socket of sockets) socket.destroy();
  silent.close();
});

async function ask(url: string, answer?: (body: string) => Response) {
  const app = Fastify();
  app.setErrorHandler(problemErrorHandler);
  const backend = new PrometheusAnalytics({
    url,
    timeoutMs: 300,
    ...(answer ? { fetch: () => Promise.resolve(answer('')) } : {}),
  });
  await app.register(analyticsRoutes, { backend });
  const started = Date.now();
  const res = await app.inject({ url: '/api/analytics/summary?window=5m' });
  const elapsed = Date.now() - started;
  await app.close();
  return { res, elapsed, body: res.json<Record<string, unknown>>() };
}

describe('Prometheus unreachable or slow', () => {
  it('slow: 504 analytics-timeout within the timeout', async () => {
    const { res, elapsed, body } = await ask(`http://127.0.0.1:${silentPort}`);
    expect(res.statusCode).toBe(504);
    expect(res.headers['content-type']).toContain('application/problem+json');
    expect(body).toMatchObject({
      type: 'https://hookgate.dev/problems/analytics-timeout',
      code: 'HG_ERR_ANALYTICS_TIMEOUT',
      status: 504,
      detail: 'Prometheus did not answer within 300 ms',
    });
    expect(body).not.toHaveProperty('stack');
    expect(elapsed).toBeLessThan(2000);
  });

  it('unreachable: 503 analytics-unavailable with Retry-After', async () => {
    const { res, body } = await ask(`http://127.0.0.1:${closedPort}`);
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBe('5');
    expect(body).toMatchObject({
      code: 'HG_ERR_ANALYTICS_UNAVAILABLE',
      detail: 'Prometheus could not be reached',
    });
  });

  it('an error answer or a body that is not JSON: 503', async () => {
    const bad = await ask(
      'http://p',
      () => new Response('<html>proxy error</html>', { status: 502 }),
    );
    expect(bad.res.statusCode).toBe(503);
    expect(bad.body.detail).toBe('Prometheus answered 502 with a body that is not JSON');
    const error = await ask(
      'http://p',
      () =>
        new Response(JSON.stringify({ status: 'error', errorType: 'bad_data', error: 'x' }), {
          status: 400,
        }),
    );
    expect(error.res.statusCode).toBe(503);
    expect(error.body.detail).toBe('Prometheus answered 400 (bad_data)');
  });
});
