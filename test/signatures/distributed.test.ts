// Distributed mode: two gateways share the replay memory through a real redis-server.
// A dev runtime (operator and gateway in one process) writes the routes to Redis; a
// second gateway role serves them. The same signed delivery sent 20 times at once,
// half to each gateway: exactly one runs; the others get its answer, or 409 while it
// runs (its id is the implicit idempotency key, shared in Redis too).
import { Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGatewayRuntime } from '../../roles/gateway.ts';
import type { Serving } from '../../roles/serving.ts';
import { PROBLEM_BASE } from '../../runtime/errors.ts';
import { eventually } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { secret, trigger, workflow } from '../support/manifests.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';

const SECRET = `whsec_${Buffer.from('distributed-replay-secret-01').toString('base64')}`;
const URL_PATH = '/webhook/default_production_echo/signed';

describe.skipIf(!redisAvailable())('signed deliveries across two gateways sharing Redis', () => {
  let server: RedisServer;
  const clients: Redis[] = [];
  let dev: TestRuntime;
  let gateway: Serving;
  const client = () => {
    const redis = new Redis(server.url);
    clients.push(redis);
    return redis;
  };

  beforeAll(async () => {
    server = await startRedis();
    dev = await startRuntime({ redis: client() });
    await dev.apply(
      'all.yaml',
      [
        secret('svix', { current: SECRET }),
        workflow('echo', { nodes: [{ id: 'out', type: 'transform', expression: 'body' }] }),
        trigger('signed', {
          workflowRef: { name: 'echo' },
          pathSegment: 'signed',
          auth: {
            method: 'signature',
            signature: { preset: 'standardWebhooks', secretRef: { name: 'svix' } },
          },
          response: { mode: 'waitForCompletion' },
        }),
      ],
      ['signed'],
    );
    gateway = await createGatewayRuntime({
      redis: client(),
      baseUrl: 'http://localhost',
      executions: 'inline',
    });
    await eventually(async () => {
      await gateway.table.refresh();
      expect(gateway.table.size).toBe(1);
    }, 20_000);
  }, 60_000);

  afterAll(async () => {
    await gateway?.close();
    await dev?.stop();
    for (const c of clients) c.disconnect();
    await server?.stop();
  });

  it('exactly one of 20 concurrent copies runs', async () => {
    const raw = '{"orderId":"D-1"}';
    const now = new Date();
    const headers = {
      'content-type': 'application/json',
      'webhook-id': 'msg_distributed_1',
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': new Webhook(SECRET).sign('msg_distributed_1', now, raw),
    };
    const apps = [dev.app, gateway.app];
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_v, i) =>
        apps[i % 2]!.inject({ method: 'POST', url: URL_PATH, headers, payload: raw }),
      ),
    );
    // One runs; every other copy gets its stored answer, or 409 while it is in progress
    // (the delivery id is the implicit idempotency key, shared in Redis too).
    const accepted = answers.filter(
      (a) => a.statusCode === 200 && !a.headers['idempotent-replayed'],
    );
    expect(accepted).toHaveLength(1);
    expect(accepted[0]!.json()).toEqual({ orderId: 'D-1' });
    for (const a of answers.filter((x) => x !== accepted[0])) {
      if (a.statusCode === 200) expect(a.json()).toEqual({ orderId: 'D-1' });
      else expect(a.json<{ type: string }>().type).toBe(`${PROBLEM_BASE}idempotency-in-progress`);
    }
    const keys = await clients[0]!.keys('hookgate:replay:*');
    expect(keys).toHaveLength(1);
  });
});
