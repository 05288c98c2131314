// The fault-injecting proxy of test/support/fault-proxy.ts keeps one TCP stream's
// promises, or the tests that use it would test what no network does: bytes never
// overtake one another when the latency changes, and a blackhole holds everything not
// yet delivered (delayed bytes included) until it closes. A real redis-server and
// ioredis, whose replies are matched to commands by their order.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, sleep } from '../support/eventually.ts';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';

describe.skipIf(!redisAvailable())('the fault proxy', () => {
  let server: RedisServer;
  let proxy: FaultProxy;
  let through: Redis;
  let direct: Redis;
  beforeAll(async () => {
    server = await startRedis();
    proxy = await startFaultProxy({ port: server.port });
    through = new Redis({ host: '127.0.0.1', port: proxy.port });
    direct = new Redis({ host: '127.0.0.1', port: server.port });
    await direct.mset('a', 'A', 'b', 'B');
    await through.ping(); // connected through the proxy before the faults
  });
  afterAll(async () => {
    through?.disconnect();
    direct?.disconnect();
    await proxy?.close();
    await server?.stop();
  });

  it('latency lifted: what was sent later does not overtake what is still delayed', async () => {
    proxy.set({ kind: 'latency', ms: 300 });
    const first = through.get('a');
    await sleep(50);
    proxy.set({ kind: 'pass' });
    const second = through.get('b');
    expect(await Promise.all([first, second])).toEqual(['A', 'B']);
  });

  it('a blackhole holds what was still delayed, and delivers it once it closes', async () => {
    proxy.set({ kind: 'latency', ms: 100 });
    const written = through.set('held', '1');
    await sleep(10);
    proxy.set({ kind: 'blackhole' });
    await sleep(300);
    expect(await direct.get('held')).toBeNull();
    proxy.set({ kind: 'pass' });
    expect(await written).toBe('OK');
    await eventually(async () => expect(await direct.get('held')).toBe('1'));
  });
});
