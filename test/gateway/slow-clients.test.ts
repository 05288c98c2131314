// G6: a client that trickles its headers or its body cannot hold a socket forever.
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';

let rt: TestRuntime;
let port: number;

beforeAll(async () => {
  rt = await startRuntime({
    limits: { headersTimeout: 600, requestTimeout: 1200, connectionsCheckingInterval: 100 },
  });
  await rt.apply(
    'w.yaml',
    [workflow('orders'), trigger('ingest', { pathSegment: 'ingest' })],
    ['ingest'],
  );
  port = Number(new URL(await rt.app.listen({ port: 0, host: '127.0.0.1' })).port);
});
afterAll(() => rt.stop());

/** Open a socket, send `head`, then one byte every `everyMs`; resolve with what the server said and when it closed. */
function trickle(
  head: string,
  everyMs: number,
  maxMs: number,
): Promise<{ closedAfterMs: number; answer: string }> {
  return new Promise((resolve) => {
    const started = Date.now();
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    const timer = setInterval(() => {
      if (!socket.destroyed) socket.write('a');
    }, everyMs);
    const stop = setTimeout(() => socket.destroy(), maxMs);
    socket.on('data', (d: Buffer) => (answer += d.toString()));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(timer);
      clearTimeout(stop);
      resolve({ closedAfterMs: Date.now() - started, answer });
    });
    socket.write(head);
  });
}

describe('slow clients', () => {
  it('headers trickled one byte at a time: the server answers 408 and closes the socket', async () => {
    const r = await trickle(
      'POST /webhook/default_production_orders/ingest HTTP/1.1\r\nHost: x\r\nX-Slow: ',
      100,
      8000,
    );
    expect(r.closedAfterMs).toBeLessThan(8000);
    expect(r.answer).toMatch(/^HTTP\/1\.1 408/);
  });

  it('a body trickled one byte at a time: cut off at the request timeout', async () => {
    const head =
      'POST /webhook/default_production_orders/ingest HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n';
    const r = await trickle(head, 100, 8000);
    expect(r.closedAfterMs).toBeLessThan(8000);
  });
});
