// HOOKGATE_QUEUE_ACK_REPLICAS through the gateway role, on a real redis-server with a
// real replica: the 202 waits for the replica; a replica that does not answer turns it
// into 503 store-unavailable (problem+json, Retry-After), and the retry with the same
// Idempotency-Key gets the execution the first request queued, once.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Serving } from '../../roles/serving.ts';
import { PROBLEM_BASE } from '../../runtime/errors.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { startQueueStack, type QueueStack } from '../support/queue-stack.ts';
import { redisAvailable, startReplicated, type RedisServer } from '../support/redis.ts';
import { serverBackend, type RedisBackend } from '../support/redis-backends.ts';

const url = '/webhook/default_production_orders/ingest';

describe.skipIf(!redisAvailable())('a gateway that waits for a Redis replica', () => {
  let master: RedisServer;
  let replica: RedisServer;
  let backend: RedisBackend;
  let stack: QueueStack;
  let gateway: Serving;

  beforeAll(async () => {
    ({ master, replica } = await startReplicated());
    backend = serverBackend(master);
    stack = await startQueueStack({
      backend,
      manifests: {
        file: 'orders.yaml',
        docs: [
          workflow('orders', { nodes: [{ id: 'n', type: 'transform', expression: 'body' }] }),
          trigger('ingest', { pathSegment: 'ingest' }),
        ],
        ready: ['ingest'],
      },
      gateway: {
        // Long enough for a replica on a machine busy with the rest of the suite (200 ms
        // was not, in CI); the frozen replica's 503 waits it out once.
        queueAcks: { replicas: 1, timeoutMs: 2_000 },
      },
      // No worker: what the gateway queued stays queued, and is what the test reads.
      listen: false,
    });
    ({ gateway } = stack);
  }, 30_000);
  afterAll(async () => {
    replica?.resume();
    await stack?.close();
    await replica?.stop();
    await backend?.stop();
  });

  const post = (body: unknown, key?: string) =>
    gateway.app.inject({
      method: 'POST',
      url,
      headers: {
        'content-type': 'application/json',
        ...(key === undefined ? {} : { 'idempotency-key': key }),
      },
      payload: JSON.stringify(body),
    });

  const queuedWith = async (n: number) =>
    (await gateway.engine.list({ triggerKey: 'default/ingest', limit: 1000 })).filter(
      (e) => (e.input.body as { n?: number }).n === n,
    );

  it('202 once the replica has the execution', async () => {
    const res = await post({ n: 1 });
    expect(res.statusCode, res.body).toBe(202);
    const { executionId } = res.json<{ executionId: string }>();
    const onReplica = new Redis(replica.url);
    try {
      const keys = await onReplica.keys(`*${executionId}*`);
      expect(keys.length).toBeGreaterThan(0);
    } finally {
      onReplica.disconnect();
    }
  });

  it('503 while the replica does not answer; the retry with the key gets that execution', async () => {
    replica.pause();
    let refused;
    try {
      refused = await post({ n: 2 }, 'order-2');
    } finally {
      replica.resume();
    }
    expect(refused.statusCode).toBe(503);
    expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(refused.headers['retry-after']).toBe('1');
    const problem = refused.json<{ type: string; detail: string }>();
    expect(problem.type).toBe(`${PROBLEM_BASE}store-unavailable`);
    expect(problem.detail).toMatch(/0 of the 1 Redis replicas/);
    // Queued on the master all the same: the retry must not queue a second one.
    const [queued, ...more] = await queuedWith(2);
    expect(queued).toBeDefined();
    expect(more).toEqual([]);

    const retried = await post({ n: 2 }, 'order-2');
    expect(retried.statusCode).toBe(202);
    expect(retried.json<{ executionId: string }>().executionId).toBe(queued?.id);
    expect((await queuedWith(2)).map((e) => e.id)).toEqual([queued?.id]);
  });

  it('counts the outcomes in hookgate_queue_replica_acks_total', async () => {
    const metrics = await gateway.app.inject({ method: 'GET', url: '/metrics' });
    expect(metrics.statusCode).toBe(200);
    const count = (result: string) =>
      Number(
        new RegExp(`^hookgate_queue_replica_acks_total\\{result="${result}"\\} (\\d+)$`, 'm').exec(
          metrics.body,
        )?.[1],
      );
    // The 202 above, the retry's 202; the 503 of the frozen replica; no WAIT failed.
    expect([count('confirmed'), count('unconfirmed'), count('failed')]).toEqual([2, 1, 0]);
  });
});
