// A redis-server and a client of it for the describe this is called in: started before
// its tests, stopped after. Read `redis` inside the tests (it is made in beforeAll).
import { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { startRedis, type RedisServer } from './redis.ts';

export function redisOfSuite(): { server: RedisServer; redis: Redis } {
  const suite = {} as { server: RedisServer; redis: Redis };
  beforeAll(async () => {
    suite.server = await startRedis();
    suite.redis = new Redis(suite.server.url);
  });
  afterAll(async () => {
    suite.redis?.disconnect();
    await suite.server?.stop();
  });
  return suite;
}
