// A Redis at its maxmemory (policy noeviction, as the chart runs it) refuses writes
// with `OOM command not allowed`. The gateway stops queueing a little before that (90 %
// of maxmemory, so workers can still store results) and answers 503 store-full with
// Retry-After, never a 500; an OOM reply that gets through is the same 503. It keeps
// reading (the executions API stays 200) and accepts again once workers made room.
// Against a real redis-server started with a tiny maxmemory.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGatewayRuntime } from '../../roles/gateway.ts';
import { createWorkerRuntime } from '../../roles/worker.ts';
import type { Serving } from '../../roles/serving.ts';
import { PROBLEM_BASE } from '../../runtime/errors.ts';
import { QUEUE } from '../../runtime/engine/queued-engine.ts';
import { eventually } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';

const url = '/webhook/default_production_orders/ingest';

describe.skipIf(!redisAvailable())('Redis at its maxmemory', () => {
  let server: RedisServer;
  const clients: Redis[] = [];
  let control: TestRuntime;
  let gateway: Serving;
  const redis = () => {
    const c = new Redis(server.url);
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    server = await startRedis({
      args: ['--maxmemory', '48mb', '--maxmemory-policy', 'noeviction'],
    });
    control = await startRuntime({ redis: redis() });
    await control.apply(
      'orders.yaml',
      [
        // A small result: what fills Redis here is the queued requests.
        workflow('orders', {
          nodes: [{ id: 'n', type: 'transform', expression: '{ "ok": true }' }],
        }),
        trigger('ingest', { pathSegment: 'ingest' }),
      ],
      ['ingest'],
    );
    // No worker: queued executions stay in Redis until it is full.
    gateway = await createGatewayRuntime({ redis: redis(), baseUrl: 'http://localhost' });
    await eventually(() => expect(gateway.table.size).toBe(1));
  });
  afterAll(async () => {
    await gateway?.close();
    await control?.stop();
    for (const c of clients) c.disconnect();
    await server?.stop();
  });

  const post = (headers: Record<string, string> = {}) =>
    gateway.app.inject({
      method: 'POST',
      url,
      headers: { 'content-type': 'application/json', ...headers },
      payload: JSON.stringify({ text: 'q'.repeat(200_000) }),
    });

  it('answers 503 store-full with Retry-After before Redis refuses writes, then recovers', async () => {
    const statuses: number[] = [];
    let refused: Awaited<ReturnType<typeof post>> | undefined;
    for (let i = 0; i < 1000 && !refused; i++) {
      const res = await post();
      statuses.push(res.statusCode);
      if (res.statusCode !== 202) refused = res;
    }
    const info = await redis().info('memory');
    const used = Number(/^used_memory:(\d+)/m.exec(info)?.[1]);
    expect(used).toBeLessThan(48 * 1024 * 1024 * 0.95); // stopped short of maxmemory
    expect(statuses.filter((s) => s === 202).length).toBeGreaterThan(5);
    expect(refused?.statusCode).toBe(503);
    expect(refused?.headers['retry-after']).toBe('30');
    expect(refused?.json()).toMatchObject({ type: `${PROBLEM_BASE}store-full`, status: 503 });
    // Again, and with an Idempotency-Key (its claim is a write too): never a 500. The
    // gateway's memory reading (every second) replaces its estimate of what it queued
    // since (1.5x each record) with Redis's own figure, which may leave room for more
    // first: a dozen or two when the reading comes right after a refusal (seen on a
    // loaded CI machine: over 20). What must hold is that Redis is never reached.
    // Each accepted request with a key of its own: a key that was accepted replays its
    // 202 without queueing anything, so one key kept would never reach the limit.
    let keys = 0;
    let refusedKey = '';
    for (const withKey of [false, true]) {
      const headers = (): Record<string, string> =>
        withKey ? { 'idempotency-key': (refusedKey = `fill-${++keys}`) } : {};
      let res = await post(headers());
      for (let i = 0; i < 100 && res.statusCode === 202; i++) {
        expect(res.headers['idempotent-replayed']).toBeUndefined();
        statuses.push(202);
        res = await post(headers());
      }
      expect(res.statusCode).toBe(503);
      expect(res.json()).toMatchObject({ type: `${PROBLEM_BASE}store-full` });
      const now = Number(/^used_memory:(\d+)/m.exec(await redis().info('memory'))?.[1]);
      expect(now).toBeLessThan(48 * 1024 * 1024 * 0.95);
    }
    // Reads still work.
    const list = await gateway.admin.inject({ method: 'GET', url: '/api/executions?limit=5' });
    expect(list.statusCode).toBe(200);
    expect(list.json<{ items: unknown[] }>().items).toHaveLength(5);
    // The gateway stopped short of the limit, so a worker can still store the results
    // (cut to 64 KiB) of everything queued; then there is room again.
    // The headroom (10 %: 4.8 MB) must hold what the workers write at once: 4 running
    // records of ~200 kB here, 32 × the largest body by default (docs: chart README).
    const worker = await createWorkerRuntime({ redis: redis(), blockMs: 200, concurrency: 4 });
    try {
      await eventually(async () => {
        expect(await redis().xlen(QUEUE.stream)).toBe(0);
        const queued = await gateway.engine.list({ status: 'queued', limit: 1000 });
        expect(queued).toHaveLength(0);
      }, 30_000);
      const done = await gateway.engine.list({ status: 'succeeded', limit: 1000 });
      expect(done.length).toBe(statuses.filter((s) => s === 202).length);
      await eventually(async () => expect((await post()).statusCode).toBe(202), 10_000);
      // The gateway's refusal kept nothing under the Idempotency-Key it came with: the
      // retry it asked for (Retry-After) runs, instead of getting the 503 replayed.
      const retried = await post({ 'idempotency-key': refusedKey });
      expect(retried.statusCode).toBe(202);
      expect(retried.headers['idempotent-replayed']).toBeUndefined();
    } finally {
      await worker.close(2_000);
    }
  }, 120_000);

  it('an OOM reply that gets through is the same 503, never a 500', async () => {
    const admin = redis();
    await admin.config('SET', 'maxmemory', '1mb'); // now far above it: every write is refused
    try {
      const res = await gateway.admin.inject({ method: 'GET', url: '/api/executions?limit=1' });
      expect(res.statusCode).toBe(200);
      const idem = await post({ 'idempotency-key': 'full-2' });
      expect(idem.statusCode).toBe(503);
      expect(idem.json()).toMatchObject({ type: `${PROBLEM_BASE}store-full` });
      expect(idem.headers['retry-after']).toBe('30');
    } finally {
      await admin.config('SET', 'maxmemory', '48mb');
    }
    // Refused at the key's claim (a write too): nothing kept under it either.
    const retried = await eventually(async () => {
      const res = await post({ 'idempotency-key': 'full-2' });
      expect(res.statusCode).toBe(202);
      return res;
    }, 10_000);
    expect(retried.headers['idempotent-replayed']).toBeUndefined();
    const replayed = await post({ 'idempotency-key': 'full-2' });
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect(replayed.json<{ executionId: string }>().executionId).toBe(
      retried.json<{ executionId: string }>().executionId,
    );
  });
});
