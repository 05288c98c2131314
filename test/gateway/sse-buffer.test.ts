// A client that opens an SSE stream and never reads it does not make the server buffer
// without end: past the stream buffer budget its connection is cut, and the metrics say so.
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSse } from '../../runtime/gateway/sse.ts';
import { createHttpApp } from '../../runtime/http-app.ts';
import { eventually } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';

let rt: TestRuntime;
let base = '';
let adminPort = 0;

beforeAll(async () => {
  rt = await startRuntime({ budgets: { streamBufferBytes: 64 * 1024 } });
  await rt.apply(
    'o.yaml',
    [workflow('orders'), trigger('ingest', { pathSegment: 'ingest' })],
    ['ingest'],
  );
  base = await rt.app.listen({ port: 0, host: '127.0.0.1' });
  adminPort = Number(new URL(await rt.admin.listen({ port: 0, host: '127.0.0.1' })).port);
});
afterAll(() => rt.stop());

describe('SSE buffers', () => {
  it('a live stream whose client stops reading is cut off past its buffer budget', async () => {
    const socket = connect(adminPort, '127.0.0.1');
    socket.setNoDelay(true);
    await new Promise((r) => socket.once('connect', r));
    socket.write(
      'GET /webhook-events/default_production_orders/ingest HTTP/1.1\r\nHost: x\r\n\r\n',
    );
    await new Promise((r) => socket.once('data', r));
    socket.pause(); // reads nothing more: the kernel buffers fill, then the server's
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    socket.on('error', () => undefined);
    const header = { 'content-type': 'application/json', 'x-filler': 'f'.repeat(4000) };
    await eventually(
      async () => {
        await Promise.all(
          Array.from({ length: 50 }, () =>
            fetch(`${base}/webhook/default_production_orders/ingest`, {
              method: 'POST',
              headers: header,
              body: '{}',
            }),
          ),
        );
        const metrics = await (await fetch(`${base}/metrics`)).text();
        expect(metrics).toMatch(
          /^hookgate_store_evictions_total\{store="sse-buffers",reason="bytes"\} [1-9]/m,
        );
      },
      60_000,
      10,
    );
    const metrics = await (await fetch(`${base}/metrics`)).text();
    const held = Number(/^hookgate_store_bytes\{store="sse-buffers"\} (\d+)/m.exec(metrics)?.[1]);
    expect(held).toBeLessThanOrEqual(64 * 1024 + 16 * 1024);
    // The connection is reset, although the client still reads nothing: what was
    // buffered for it is let go, not kept until it reads (or for ever).
    await eventually(async () => {
      const open = await new Promise<number>((resolve, reject) =>
        rt.admin.server.getConnections((error, count) => (error ? reject(error) : resolve(count))),
      );
      expect(open).toBe(0);
    }, 5_000);
    socket.resume();
    await closed;
  }, 90_000);

  it('a burst over the budget before the answer starts (a replay) reaches a client that reads, then the end', async () => {
    const errors: unknown[] = [];
    const { app } = createHttpApp({ limits: { sseBufferBytes: 8 * 1024 } });
    app.addHook('onError', (_request, _reply, error, done) => {
      errors.push(error);
      done();
    });
    app.get('/s', async (request, reply) => {
      const { sse, body } = openSse(request, reply);
      // What the execution channels do for a running execution: its events replayed at once.
      for (let i = 1; i <= 40; i++) sse.send('node.finished', { pad: 'x'.repeat(2000) }, i);
      return reply.send(body);
    });
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const res = await fetch(`${url}/s`);
      expect(res.status).toBe(200);
      const ids = (await res.text()).match(/^id: \d+$/gm) ?? [];
      // Up to the budget (and the stream's own buffer), in order, then the end: the
      // client reconnects with the last id it got and makes progress.
      expect(ids.length).toBeGreaterThan(3);
      expect(ids.slice(0, 3)).toEqual(['id: 1', 'id: 2', 'id: 3']);
      expect(errors).toEqual([]);
    } finally {
      await app.close();
    }
  });
});
