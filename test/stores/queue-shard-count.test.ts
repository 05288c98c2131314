// Gateways and workers say which HOOKGATE_QUEUE_SHARDS they use (roles/queue-shards.ts):
// another number said by a live process of the same Redis is logged as an error, once;
// one said long ago (an old pod before a drained change) is not.
import pino from 'pino';
import { beforeEach, describe, expect, it } from 'vitest';
import { SHARD_COUNT_KEY, watchShardCount } from '../../roles/queue-shards.ts';
import { eventually, sleep } from '../support/eventually.ts';
import { redisAvailable } from '../support/redis.ts';
import { redisOfSuite } from '../support/redis-suite.ts';

interface Line {
  level: number;
  msg: string;
  other?: number;
}

function capture(): { logger: pino.Logger; lines: Line[] } {
  const lines: Line[] = [];
  const logger = pino(
    { level: 'info' },
    { write: (l: string) => lines.push(JSON.parse(l) as Line) },
  );
  return { logger, lines };
}

describe.skipIf(!redisAvailable())('the number of queue shards, said by every process', () => {
  const suite = redisOfSuite();
  beforeEach(async () => {
    await suite.redis.flushall();
  });

  it('the same number everywhere: nothing to say', async () => {
    const { redis } = suite;
    const a = capture();
    const b = capture();
    const stops = [
      watchShardCount(redis, 12, a.logger, { everyMs: 50 }),
      watchShardCount(redis, 12, b.logger, { everyMs: 50 }),
    ];
    await sleep(300);
    stops.forEach((stop) => stop());
    expect([...a.lines, ...b.lines]).toEqual([]);
    expect(await redis.hkeys(SHARD_COUNT_KEY)).toEqual(['12']);
    expect(await redis.pttl(SHARD_COUNT_KEY)).toBeGreaterThan(0);
  });

  it('two numbers at once: each side logs an error naming the other, once', async () => {
    const { redis } = suite;
    const workers = capture();
    const gateways = capture();
    const stops = [
      watchShardCount(redis, 1, workers.logger, { everyMs: 50 }),
      watchShardCount(redis, 12, gateways.logger, { everyMs: 50 }),
    ];
    await eventually(() => {
      expect(workers.lines).toHaveLength(1);
      expect(gateways.lines).toHaveLength(1);
    });
    await sleep(300);
    stops.forEach((stop) => stop());
    expect(workers.lines).toEqual([expect.objectContaining({ level: 50, other: 12 })]);
    expect(gateways.lines).toEqual([expect.objectContaining({ level: 50, other: 1 })]);
    expect(workers.lines[0]?.msg).toContain('HOOKGATE_QUEUE_SHARDS is 1 here but 12');
  });

  it('a number said before the window (a drained, finished change) is not an error', async () => {
    const { redis } = suite;
    await redis.hset(SHARD_COUNT_KEY, '1', String(Date.now() - 600_000));
    const now = capture();
    const stop = watchShardCount(redis, 12, now.logger, { everyMs: 50, windowMs: 180_000 });
    await sleep(200);
    stop();
    expect(now.lines).toEqual([]);
  });
});
