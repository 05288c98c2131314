// A replay under an Idempotency-Key is the first answer with its headers: the
// Content-Type, the trigger's custom headers and the respond node's (a Cache-Control, a
// sandboxed Content-Security-Policy, a Vary), not the per-request ones (X-Request-ID),
// within MAX_REPLAYED_HEADER_BYTES. Through the dev runtime on the memory stores and on a
// real redis-server, where an entry stored before the headers were kept (three of them)
// still replays as it did.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  MAX_REPLAYED_HEADER_BYTES,
  DEFAULT_IDEMPOTENCY_WINDOW_MS,
} from '../../runtime/gateway/idempotency/claims.ts';
import { requestFingerprint } from '../../runtime/gateway/idempotency/store.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';

const BASE = '/webhook/default_production_';
/** A respond node's header value at its bound (4 KiB): two fit the replay, not three. */
const BIG = 'b'.repeat(4000);

const docs = () => [
  workflow('page', {
    nodes: [
      {
        id: 'answer',
        type: 'respond',
        statusCode: 201,
        headers: {
          'X-From-Node': 'yes',
          'Cache-Control': 'max-age=60',
          'Content-Security-Policy': "default-src 'none'; sandbox allow-scripts",
          Vary: 'Accept',
        },
        expression: '{ "n": body.n }',
      },
    ],
  }),
  workflow('big', {
    nodes: [
      {
        id: 'answer',
        type: 'respond',
        headers: { 'X-Big-1': BIG, 'X-Big-2': BIG, 'X-Big-3': BIG },
        expression: '{ "n": body.n }',
      },
    ],
  }),
  workflow('plain', { nodes: [{ id: 'echo', type: 'transform', expression: '"n=" & body.n' }] }),
  trigger('page', {
    workflowRef: { name: 'page' },
    pathSegment: 'page',
    response: {
      mode: 'waitForResponseNode',
      contentType: 'text/html; charset=utf-8',
      headers: { custom: [{ name: 'X-Api-Version', value: '7' }] },
    },
  }),
  trigger('big', {
    workflowRef: { name: 'big' },
    pathSegment: 'big',
    response: { mode: 'waitForResponseNode' },
  }),
  trigger('plain', {
    workflowRef: { name: 'plain' },
    pathSegment: 'plain',
    response: { mode: 'waitForCompletion', contentType: 'text/plain; charset=utf-8' },
  }),
];

function suite(name: string, start: () => Promise<TestRuntime>, stop?: () => Promise<void>) {
  describe(name, () => {
    let rt: TestRuntime;
    let run = 0;
    const key = (label: string) => `${label}-${name.replace(/\W/g, '')}-${++run}-${Date.now()}`;
    const post = (path: string, idempotencyKey: string, payload = '{"n":1}') =>
      rt.app.inject({
        method: 'POST',
        url: `${BASE}${path}/${path}`,
        headers: { 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
        payload,
      });

    beforeAll(async () => {
      rt = await start();
      await rt.apply('replays.yaml', docs(), ['page', 'big', 'plain']);
    });
    afterAll(async () => {
      await rt?.stop();
      await stop?.();
    });

    it("replays the answer's type and the trigger's and respond node's headers, not the per-request ones", async () => {
      const k = key('page');
      const first = await post('page', k);
      expect(first.statusCode).toBe(201);
      expect(first.headers['x-from-node']).toBe('yes');
      const again = await post('page', k);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.statusCode).toBe(201);
      expect(again.body).toBe(first.body);
      for (const header of [
        'content-type',
        'x-from-node',
        'cache-control',
        'content-security-policy',
        'vary',
        'x-api-version',
        'x-correlation-id',
        'x-content-type-options',
      ])
        expect([header, again.headers[header]]).toEqual([header, first.headers[header]]);
      expect(again.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(again.headers['content-security-policy']).toBe(
        "default-src 'none'; sandbox allow-scripts",
      );
      // The replay's own request id.
      expect(again.headers['x-request-id']).not.toBe(first.headers['x-request-id']);
      const runs = await rt.engine.list({ triggerKey: 'default/page', limit: 100 });
      expect(runs).toHaveLength(1);
    });

    it('replays a custom type of a Wait for Completion answer', async () => {
      const k = key('plain');
      const first = await post('plain', k, '{"n":4}');
      expect(first.body).toBe('n=4');
      const again = await post('plain', k, '{"n":4}');
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.headers['content-type']).toBe('text/plain; charset=utf-8');
      expect(again.body).toBe('n=4');
    });

    it(`keeps the headers within ${MAX_REPLAYED_HEADER_BYTES} bytes`, async () => {
      const k = key('big');
      const first = await post('big', k);
      expect(first.headers['x-big-3']).toBe(BIG);
      const again = await post('big', k);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.headers['x-big-1']).toBe(BIG);
      expect(again.headers['x-big-2']).toBe(BIG);
      expect(again.headers['x-big-3']).toBeUndefined();
      expect(again.body).toBe(first.body);
    });
  });
}

suite('memory stores', () => startRuntime());

describe.skipIf(!redisAvailable())('Redis stores', () => {
  let server: RedisServer;
  let redis: Redis;
  beforeAll(async () => {
    server = await startRedis();
    redis = new Redis(server.url);
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });
  suite('redis', () => startRuntime({ redis }));

  it('an entry stored before the headers were kept (three of them) replays as it did', async () => {
    const rt = await startRuntime({ redis });
    try {
      await rt.apply('replays.yaml', docs(), ['plain']);
      const url = `${BASE}plain/plain`;
      const payload = '{"n":9}';
      // As a gateway of the version before wrote it (redis-store.ts, its entry layout).
      const old = {
        status: 200,
        headers: { 'content-type': 'text/plain; charset=utf-8', 'x-correlation-id': 'c-old' },
        body: 'n=9 (stored)',
        executionId: 'e-old',
      };
      const entry = {
        f: requestFingerprint('POST', url, Buffer.from(payload)),
        t: DEFAULT_IDEMPOTENCY_WINDOW_MS,
        r: JSON.stringify(old),
      };
      await redis.set('hookgate:idem:default/plain:old-entry', JSON.stringify(entry), 'PX', 60_000);
      const res = await rt.app.inject({
        method: 'POST',
        url,
        headers: { 'content-type': 'application/json', 'idempotency-key': 'old-entry' },
        payload,
      });
      expect(res.headers['idempotent-replayed']).toBe('true');
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('text/plain; charset=utf-8');
      expect(res.headers['x-correlation-id']).toBe('c-old');
      expect(res.body).toBe('n=9 (stored)');
    } finally {
      await rt.stop();
    }
  });
});
