// A gateway (or the embedded server over Redis) whose start fails leaves no connection
// of its own behind: what it opened (the stores' connections, the engine's, the route
// table's watch) is closed before it throws. A failed start left the rate limiter's and
// the engine's connections reconnecting for good in a process that went on (an embedder,
// a test runner).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DirectorySource } from '../../operator/sources/directory.ts';
import { createDevRuntime } from '../../roles/dev.ts';
import { createGatewayRuntime } from '../../roles/gateway.ts';
import { createServing, createStores, inProcessEngine } from '../../roles/serving.ts';
import { eventually } from '../support/eventually.ts';
import { redisAvailable } from '../support/redis.ts';
import { singleRedis } from '../support/redis-backends.ts';

const clients = async (backend: Awaited<ReturnType<typeof singleRedis>>) =>
  String(await backend.client.client('LIST'))
    .split('\n')
    .filter(Boolean).length;

/**
 * Starts a role over a fresh Redis with `start`, which must fail with `error`; then the
 * server has the clients it had before (the test's own connection among them).
 */
async function failsAndCloses(
  start: (
    redis: ReturnType<Awaited<ReturnType<typeof singleRedis>>['connect']>,
  ) => Promise<unknown>,
  error?: RegExp | string,
): Promise<void> {
  const backend = await singleRedis();
  try {
    const redis = backend.connect();
    await redis.ping();
    const before = await clients(backend);
    await expect(start(redis)).rejects.toThrow(error);
    await eventually(async () => expect(await clients(backend)).toBe(before));
    redis.disconnect();
  } finally {
    await backend.stop();
  }
}

describe.skipIf(!redisAvailable())('a role whose start fails', () => {
  it('the gateway closes the connections it opened before it throws', async () => {
    await failsAndCloses((redis) =>
      createGatewayRuntime({ redis, baseUrl: 'http://localhost', queueShards: 0 }),
    );
  });

  it('the embedded server over Redis closes its connections when its manifests cannot be read', async () => {
    await failsAndCloses((redis) =>
      createDevRuntime({ redis, dir: '/nonexistent-hookgate-dir', baseUrl: 'http://localhost' }),
    );
  });
});

describe('an embedded start that fails after its gateway reported', () => {
  it('withdraws the report and stops refreshing it: the operator does not count a gateway that never served', async () => {
    const stores = createStores();
    const engine = inProcessEngine();
    // Fails once the reporter has started (embedded: at once), as the admin app or the
    // store metrics could.
    const failing: typeof engine = (observer, routes) => {
      const made = engine(observer, routes);
      return Object.defineProperty({ ...made }, 'stores', {
        get: () => {
          throw new Error('store metrics failed');
        },
      });
    };
    try {
      await expect(
        createServing({ baseUrl: 'http://localhost', waitForRoutes: false }, stores, failing),
      ).rejects.toThrow('store metrics failed');
      expect(await stores.gateways.live()).toEqual([]);
    } finally {
      stores.close();
    }
  });
});

describe.skipIf(!redisAvailable())('an embedded server whose serving fails to start', () => {
  it("throws the start's own error, not one from stopping its loop, and still closes its connections", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hookgate-failed-start-'));
    class StopFails extends DirectorySource {
      override async stop(): Promise<void> {
        await super.stop();
        throw new Error('the source did not stop');
      }
    }
    try {
      await failsAndCloses(
        (redis) =>
          createDevRuntime({
            redis,
            source: new StopFails({ dir }),
            // Refused by createServing (the guards' same origin), once the loop runs.
            baseUrl: 'not a url',
          }),
        /Invalid URL/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
