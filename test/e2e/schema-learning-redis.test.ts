// Schema learning in the distributed shape, over a real redis-server: the gateway queues
// executions and records request bodies, the worker runs them and records the
// responses, and the proposal read from the gateway's admin listener merges both.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Serving } from '../../roles/serving.ts';
import { createGatewayRuntime } from '../../roles/gateway.ts';
import { createWorkerRuntime, type WorkerRuntime } from '../../roles/worker.ts';
import { eventually } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';

const path = '/webhook/default_production_orders/learn';

interface Proposal {
  learning: boolean;
  samples: { requests: number; responses: number };
  input: Record<string, unknown> | null;
  output: Record<string, unknown> | null;
}

describe.skipIf(!redisAvailable())('schema learning through Redis, a gateway and a worker', () => {
  let redisServer: RedisServer;
  const clients: Redis[] = [];
  let control: TestRuntime;
  let gateway: Serving;
  let worker: WorkerRuntime;
  const redis = () => {
    const c = new Redis(redisServer.url);
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    redisServer = await startRedis();
    control = await startRuntime({ redis: redis() });
    await control.apply(
      'learn.yaml',
      [
        workflow('orders', {
          nodes: [{ id: 'answer', type: 'transform', expression: '{ "total": body.total }' }],
        }),
        trigger('learn', {
          pathSegment: 'learn',
          response: { mode: 'waitForCompletion' },
          schema: {
            mode: 'automatic',
            input: {},
            output: {},
            learning: { enabled: true, maxSamples: 3 },
          },
        }),
      ],
      ['learn'],
    );
    gateway = await createGatewayRuntime({ redis: redis(), baseUrl: 'http://localhost' });
    await eventually(() => expect(gateway.table.size).toBe(1));
    worker = await createWorkerRuntime({ redis: redis(), blockMs: 200 });
  });
  afterAll(async () => {
    await gateway?.close();
    await worker?.close(2_000);
    await control?.stop();
    for (const c of clients) c.disconnect();
    await redisServer?.stop();
  });

  const post = (body: unknown) =>
    gateway.app.inject({
      method: 'POST',
      url: path,
      headers: { 'content-type': 'application/json', authorization: 'Bearer not-kept' },
      payload: JSON.stringify(body),
    });

  it('records requests at the gateway and responses at the worker, bounded, in Redis', async () => {
    const bodies = [
      { total: 10, currency: 'EUR' },
      { total: 10.5, currency: 'EUR', coupon: 'X' },
      { total: 3, currency: 'USD' },
      { total: 4, currency: 'USD' },
    ];
    for (const body of bodies) {
      const res = await post(body);
      expect(res.statusCode, res.body).toBe(200);
    }
    const p = await eventually(async () => {
      const res = await gateway.admin.inject({
        url: '/api/triggers/default/learn/schema-proposal',
      });
      const found = res.json<Proposal>();
      if (found.samples?.responses !== 3) throw new Error(res.body);
      return found;
    });
    // maxSamples 3: the newest three of each side.
    expect(p).toMatchObject({ learning: true, samples: { requests: 3, responses: 3 } });
    expect(p.input).toEqual({
      type: 'object',
      properties: {
        total: { type: 'number' },
        currency: { type: 'string' },
        coupon: { type: 'string' },
      },
      required: ['total', 'currency'],
    });
    expect(p.output).toEqual({
      type: 'object',
      properties: { total: { type: 'number' } },
      required: ['total'],
    });
    // In Redis, bodies only: the worker wrote the responses (the gateway runs none).
    const r = clients[0] as Redis;
    const stored = await r.lrange('hookgate:samples:{default/learn}:requests', 0, -1);
    expect(stored.map((s) => JSON.parse(s) as unknown)).toEqual(bodies.slice(1).reverse());
    expect(stored.join()).not.toContain('not-kept');
    expect(await r.pttl('hookgate:samples:{default/learn}:responses')).toBeGreaterThan(0);
    // Any admin listener on the same Redis sees the same proposal.
    const fromControl = await control.admin.inject({
      url: '/api/triggers/default/learn/schema-proposal',
    });
    expect(fromControl.json<Proposal>().samples).toEqual({ requests: 3, responses: 3 });
  });

  it('resets the samples for every replica', async () => {
    const reset = await gateway.admin.inject({
      method: 'DELETE',
      url: '/api/triggers/default/learn/schema-proposal/samples',
    });
    expect(reset.statusCode).toBe(204);
    const res = await control.admin.inject({ url: '/api/triggers/default/learn/schema-proposal' });
    expect(res.json<Proposal>()).toMatchObject({
      samples: { requests: 0, responses: 0 },
      input: null,
      output: null,
    });
  });
});
