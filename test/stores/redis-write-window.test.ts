// The request path's write window (roles/redis-write-window.ts, ADR 0038): commands
// sent within it reach redis-server in one socket write, counted by the server's own
// read events (INFO stats total_reads_processed); every reply still reaches its
// command, on one Redis and on a Redis Cluster, and across a reconnect.
import type { Cluster, Redis } from 'ioredis';
import { once } from 'node:events';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RedisClient } from '../../api/records/redis-client.ts';
import { REDIS_CLIENT_DEFAULTS, redisClients } from '../../roles/redis.ts';
import { coalesceWrites } from '../../roles/redis-write-window.ts';
import { redisCluster, singleRedis, type RedisBackend } from '../support/redis-backends.ts';
import { redisAvailable } from '../support/redis.ts';

/** Read events redis-server processed so far, over every master of the backend. */
async function readsProcessed(backend: RedisBackend): Promise<number> {
  const nodes = backend.client.isCluster
    ? (backend.client as Cluster).nodes('master')
    : [backend.client as Redis];
  let total = 0;
  for (const node of nodes) {
    const info = await node.info('stats');
    total += Number(/total_reads_processed:(\d+)/.exec(info)?.[1]);
  }
  return total;
}

/** `n` INCRs of one key, each sent in its own turn of the event loop; their replies. */
async function spreadIncrs(client: RedisClient, key: string, n: number): Promise<number[]> {
  const replies: Promise<number>[] = [];
  for (let i = 0; i < n; i++) {
    replies.push(client.incr(key));
    await new Promise((resolve) => setImmediate(resolve));
  }
  return Promise.all(replies);
}

const N = 30;

function ready(client: RedisClient): Promise<unknown> {
  return client.status === 'ready' ? Promise.resolve() : once(client, 'ready');
}

for (const [shape, start] of [
  ['one Redis', singleRedis],
  ['a Redis Cluster', redisCluster],
] as const) {
  describe.skipIf(!redisAvailable())(`the write window on ${shape}`, () => {
    let backend: RedisBackend;
    beforeAll(async () => {
      backend = await start();
    }, 60_000);
    afterAll(() => backend?.stop());

    /** Reads the server made for `n` spread INCRs through `client`, and their replies. */
    async function measure(client: RedisClient, key: string) {
      await client.ping();
      await client.del(key);
      const before = await readsProcessed(backend);
      const replies = await spreadIncrs(client, key, N);
      // Minus the INFO reads of the measurement itself (one per master, the same both ways).
      return { reads: (await readsProcessed(backend)) - before, replies };
    }

    it('sends the commands of one window in one write, each reply to its command', async () => {
      const windowed = backend.connect();
      coalesceWrites(windowed, 20);
      try {
        const { reads, replies } = await measure(windowed, '{ww}:windowed');
        expect(replies).toEqual(Array.from({ length: N }, (_, i) => i + 1));
        // Written at once, each command is a read of its own unless redis-server was
        // slow enough to find several waiting; in the window, the N commands, sent
        // within a few milliseconds, leave in one write (a few reads of other
        // connections' commands counted with it).
        expect(reads).toBeLessThan(N / 3);
      } finally {
        windowed.disconnect();
      }
    });

    it('keeps working across a reconnect', async () => {
      const client = backend.connect();
      coalesceWrites(client, 5);
      try {
        expect(await spreadIncrs(client, '{ww}:reconnect', 3)).toEqual([1, 2, 3]);
        const ready = new Promise((resolve) => client.once('ready', resolve));
        client.disconnect(true);
        await ready;
        expect(await spreadIncrs(client, '{ww}:reconnect', 3)).toEqual([4, 5, 6]);
      } finally {
        client.disconnect();
        await backend.client.del('{ww}:reconnect');
      }
    });

    it("is on the request path's client only, as the settings give it", async () => {
      const silent = pino({ level: 'silent' });
      const on = redisClients(
        backend.url,
        { ...REDIS_CLIENT_DEFAULTS, writeWindowMs: 200 },
        silent,
      );
      try {
        // The request client has no offline queue: it takes commands once ready.
        await Promise.all([ready(on.requests), ready(on.main)]);
        // A command on a quiet connection leaves at once; the next, sent when the first
        // is answered, comes within the window and waits for its end.
        // A keyed command, so that on a cluster both go to the same node (a PING goes to
        // any, and each node connection has its own window).
        const twoInARow = async (client: RedisClient) => {
          await new Promise((resolve) => setTimeout(resolve, 250));
          const started = performance.now();
          await client.incr('{ww}:in-a-row');
          const first = performance.now() - started;
          await client.incr('{ww}:in-a-row');
          return { first, both: performance.now() - started };
        };
        const windowed = await twoInARow(on.requests);
        expect(windowed.first).toBeLessThan(190);
        expect(windowed.both).toBeGreaterThanOrEqual(190);
        expect((await twoInARow(on.main)).both).toBeLessThan(190);
      } finally {
        on.disconnect();
      }
    });
  });
}
