// The end-to-end suites' stack (test/support/queue-stack.ts) leaves nothing behind: its
// close() disconnects every connection its roles used, and a start that fails half-way
// stops what had started, the redis-server too, before it throws.
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { eventually } from '../support/eventually.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { startQueueStack } from '../support/queue-stack.ts';
import { redisAvailable } from '../support/redis.ts';
import { singleRedis, type RedisBackend } from '../support/redis-backends.ts';

const manifests = {
  file: 'orders.yaml',
  docs: [workflow('orders'), trigger('ingest', { pathSegment: 'ingest' })],
  ready: ['ingest'],
};

/** Whether something accepts connections on this loopback port. */
const accepts = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

describe.skipIf(!redisAvailable())('the queue stack of the end-to-end suites', () => {
  it("close() disconnects every connection of its roles, the gateway's given one too, and leaves the caller's Redis up", async () => {
    const backend = await singleRedis();
    try {
      const clients = async () =>
        String(await backend.client.client('LIST'))
          .split('\n')
          .filter(Boolean).length;
      const stack = await startQueueStack({
        backend,
        manifests,
        gateway: { redis: backend.connect() },
        worker: { blockMs: 100 },
      });
      const res = await fetch(`${stack.base}/webhook/default_production_orders/ingest`, {
        method: 'POST',
      });
      expect(res.status).toBe(202);
      expect(await clients()).toBeGreaterThan(1);
      await stack.close();
      // Only the backend's own client is left, and the server answers it.
      await eventually(async () => expect(await clients()).toBe(1));
    } finally {
      await backend.stop();
    }
  });

  it('a start that fails stops what it had started, and the Redis it started, then throws', async () => {
    let started: RedisBackend | undefined;
    await expect(
      startQueueStack({
        backend: async () => (started = await singleRedis()),
        manifests,
        // The last role: the control plane and the gateway are up when it throws. (The
        // control plane then waits out its 5 s drain: stopped right after a gateway came
        // and went, it has a reconcile in flight.)
        worker: { queueShards: 0 },
      }),
    ).rejects.toThrow(RangeError);
    expect(started).toBeDefined();
    const port = Number(new URL(started?.url ?? 'redis://127.0.0.1:1').port);
    expect(await accepts(port)).toBe(false);
  });
});
