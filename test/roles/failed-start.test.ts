// A gateway (or the embedded server over Redis) whose start fails leaves no connection
// of its own behind: what it opened (the stores' connections, the engine's, the route
// table's watch) is closed before it throws. A failed start left the rate limiter's and
// the engine's connections reconnecting for good in a process that went on (an embedder,
// a test runner).
import { describe, expect, it } from 'vitest';
import { createDevRuntime } from '../../roles/dev.ts';
import { createGatewayRuntime } from '../../roles/gateway.ts';
import { eventually } from '../support/eventually.ts';
import { redisAvailable } from '../support/redis.ts';
import { singleRedis } from '../support/redis-backends.ts';

const clients = async (backend: Awaited<ReturnType<typeof singleRedis>>) =>
  String(await backend.client.client('LIST'))
    .split('\n')
    .filter(Boolean).length;

describe.skipIf(!redisAvailable())('a role whose start fails', () => {
  it('the gateway closes the connections it opened before it throws', async () => {
    const backend = await singleRedis();
    try {
      const redis = backend.connect();
      await redis.ping();
      const before = await clients(backend);
      await expect(
        createGatewayRuntime({ redis, baseUrl: 'http://localhost', queueShards: 0 }),
      ).rejects.toThrow();
      await eventually(async () => expect(await clients(backend)).toBe(before));
      redis.disconnect();
    } finally {
      await backend.stop();
    }
  });

  it('the embedded server over Redis closes its connections when its manifests cannot be read', async () => {
    const backend = await singleRedis();
    try {
      const redis = backend.connect();
      await redis.ping();
      const before = await clients(backend);
      await expect(
        createDevRuntime({
          redis,
          dir: '/nonexistent-hookgate-dir',
          baseUrl: 'http://localhost',
        }),
      ).rejects.toThrow();
      await eventually(async () => expect(await clients(backend)).toBe(before));
      redis.disconnect();
    } finally {
      await backend.stop();
    }
  });
});
