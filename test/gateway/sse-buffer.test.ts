// A client that opens an SSE stream and never reads it does not make the server buffer
// without end: past the stream buffer budget the stream ends, what it wrote stays
// counted, and a client that has not taken it within the drain deadline has its
// connection reset. A client that reads gets what was written, then the end.
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BoundedStoreStats } from '../../runtime/bounded.ts';
import { openSse, sseBuffers, sseOverflows } from '../../runtime/gateway/sse.ts';
import { createHttpApp } from '../../runtime/http-app.ts';
import { eventually } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';

let rt: TestRuntime;
let base = '';
let adminPort = 0;

beforeAll(async () => {
  rt = await startRuntime({
    budgets: { streamBufferBytes: 64 * 1024 },
    limits: { sseDrainMs: 500 },
  });
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
    expect(held).toBeLessThanOrEqual(2 * 64 * 1024 + 16 * 1024);
    // The connection is reset after the drain deadline, although the client still reads
    // nothing: what was buffered for it is let go, not kept until it reads (or for ever).
    await eventually(async () => {
      const open = await new Promise<number>((resolve, reject) =>
        rt.admin.server.getConnections((error, count) => (error ? reject(error) : resolve(count))),
      );
      expect(open).toBe(0);
    }, 5_000);
    socket.resume();
    await closed;
  }, 90_000);

  /** An app whose stream writes `frames` of 2 KiB, `when` told, past a `budget`. */
  async function burstApp(
    when: 'before' | 'after',
    frames: number,
    { budget = 8 * 1024, drainMs = 15_000 } = {},
  ) {
    const errors: unknown[] = [];
    const { app } = createHttpApp({ limits: { sseBufferBytes: budget, sseDrainMs: drainMs } });
    app.addHook('onError', (_request, _reply, error, done) => {
      errors.push(error);
      done();
    });
    app.get('/s', async (request, reply) => {
      const { sse, body } = openSse(request, reply);
      const burst = () => {
        for (let i = 1; i <= frames; i++) sse.send('node.finished', { pad: 'x'.repeat(2000) }, i);
      };
      // Before: a running execution's events replayed at once. After: a replay from the
      // store or Redis, which lands once the answer has started.
      if (when === 'before') burst();
      else setImmediate(burst);
      return reply.send(body);
    });
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    return { app, url, errors };
  }

  it.each(['before', 'after'] as const)(
    'a burst over the budget %s the answer starts reaches a client that reads, then the end',
    async (when) => {
      const { app, url, errors } = await burstApp(when, 400);
      try {
        const res = await fetch(`${url}/s`);
        expect(res.status).toBe(200);
        const ids = (await res.text()).match(/^id: \d+$/gm) ?? [];
        // Up to the budget, in order, then the end: the client reconnects with the last
        // id it got and makes progress.
        expect(ids.length).toBeGreaterThan(3);
        expect(ids.slice(0, 3)).toEqual(['id: 1', 'id: 2', 'id: 3']);
        expect(errors).toEqual([]);
      } finally {
        await app.close();
      }
    },
  );

  it('what an ended stream still holds for a client that does not read is counted, then freed by a reset', async () => {
    // A budget larger than the kernel's socket buffers, so that some of it stays here.
    const overflows = sseOverflows.count;
    const { app, url } = await burstApp('after', 6_000, { budget: 8 << 20, drainMs: 1_000 });
    try {
      const socket = connect(Number(new URL(url).port), '127.0.0.1');
      socket.on('error', () => undefined);
      await new Promise((r) => socket.once('connect', r));
      socket.write('GET /s HTTP/1.1\r\nHost: x\r\n\r\n');
      await new Promise((r) => socket.once('data', r));
      socket.pause();
      const closed = new Promise<void>((r) => socket.once('close', () => r()));
      const stats = () => sseBuffers([app]).stats() as BoundedStoreStats;
      // Ended (past the budget) but not taken: still counted.
      await eventually(() => expect(sseOverflows.count).toBe(overflows + 1));
      expect(stats().entries).toBe(1);
      expect(stats().bytes).toBeGreaterThan(0);
      // Reset after the drain deadline: nothing held, no connection.
      await eventually(() => expect(stats()).toMatchObject({ entries: 0, bytes: 0 }), 5_000);
      await eventually(async () => {
        const open = await new Promise<number>((resolve, reject) =>
          app.server.getConnections((error, count) => (error ? reject(error) : resolve(count))),
        );
        expect(open).toBe(0);
      }, 5_000);
      socket.resume();
      await closed;
    } finally {
      await app.close();
    }
  });
});
