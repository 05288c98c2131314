// The start-up checks' one mechanism (roles/background-check.ts): asked until Redis
// answers (backing off meanwhile, never giving up), judged once it does, asked again
// when the judge says so, and nothing judged after stop. Then the Redis version check
// on it: a Redis that answers only after a long outage still gets its error (the check
// used to give up after ten tries).
import type { Logger } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { RedisClient } from '../../api/records/redis-client.ts';
import { checkInBackground, type Verdict } from '../../roles/background-check.ts';
import { warnOfOldRedis } from '../../roles/redis-version.ts';
import { eventually, sleep } from '../support/eventually.ts';

const unreachable = () => Promise.reject(new Error('connect ECONNREFUSED'));

describe('a start-up check in the background', () => {
  describe('its pauses', () => {
    // Fake timers: the pauses are the ones scheduled, not what a busy machine made of them.
    beforeEach(() => vi.useFakeTimers());
    afterEach(() => vi.useRealTimers());

    it('keeps asking while Redis does not answer, less and less often, up to the longest pause', async () => {
      const asked: number[] = [];
      const judge = vi.fn((): Verdict => 'done');
      const stop = checkInBackground(
        () => {
          asked.push(Date.now());
          return unreachable();
        },
        judge,
        { everyMs: 5, maxBackoffMs: 40 },
      );
      await vi.advanceTimersByTimeAsync(400);
      stop();
      const pauses = asked.slice(1).map((t, i) => t - (asked[i] as number));
      // Doubling from everyMs up to maxBackoffMs, then held there (80 asks at a fixed 5 ms).
      expect(pauses.slice(0, 5)).toEqual([10, 20, 40, 40, 40]);
      expect(new Set(pauses.slice(3))).toEqual(new Set([40]));
      expect(asked.length).toBe(12);
      expect(judge).not.toHaveBeenCalled();
    });

    it('judges the first answer, however late, and stops asking once judged done', async () => {
      let up = false;
      const ask = vi.fn(() => (up ? Promise.resolve('7.0.15') : unreachable()));
      const judge = vi.fn((): Verdict => 'done');
      checkInBackground(ask, judge, { everyMs: 5, maxBackoffMs: 10 });
      await vi.advanceTimersByTimeAsync(200); // far past ten tries
      expect(ask.mock.calls.length).toBeGreaterThan(10);
      up = true;
      await vi.advanceTimersByTimeAsync(10);
      expect(judge).toHaveBeenCalledWith('7.0.15');
      const asks = ask.mock.calls.length;
      await vi.advanceTimersByTimeAsync(1_000);
      expect(ask.mock.calls.length).toBe(asks);
      expect(judge).toHaveBeenCalledTimes(1);
    });

    it('asks again every everyMs while the judge says so, from the first pause after an outage', async () => {
      let answers = 0;
      const ask = vi.fn(() => (++answers > 3 ? Promise.resolve(answers) : unreachable()));
      const judged: number[] = [];
      const judge = (_answer: number): Verdict => {
        judged.push(Date.now());
        return judged.length < 4 ? 'again' : 'done';
      };
      checkInBackground(ask, judge, { everyMs: 10, maxBackoffMs: 400 });
      await vi.advanceTimersByTimeAsync(1_000);
      expect(judged).toHaveLength(4);
      const pauses = judged.slice(1).map((t, i) => t - (judged[i] as number));
      // Back at everyMs after the outage's backoff (20, 40, 80 ms), not at 160 ms.
      expect(pauses).toEqual([10, 10, 10]);
    });
  });

  it('judges nothing once stopped, not even an answer under way, and asks no more', async () => {
    let release: (v: string) => void = () => {};
    const ask = vi.fn(() => new Promise<string>((resolve) => (release = resolve)));
    const judge = vi.fn((): Verdict => 'again');
    const stop = checkInBackground(ask, judge, { everyMs: 5 });
    await eventually(() => expect(ask).toHaveBeenCalledTimes(1));
    stop();
    release('answer');
    await sleep(50);
    expect(judge).not.toHaveBeenCalled();
    expect(ask).toHaveBeenCalledTimes(1);
  });

  it('a judge that throws ends the check, without an unhandled rejection', async () => {
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown) => rejections.push(reason);
    process.on('unhandledRejection', onRejection);
    try {
      const ask = vi.fn(() => Promise.resolve('odd reply'));
      checkInBackground(
        ask,
        () => {
          throw new Error('cannot read that');
        },
        { everyMs: 5 },
      );
      await sleep(50);
      expect(ask).toHaveBeenCalledTimes(1);
      expect(rejections).toEqual([]);
    } finally {
      process.off('unhandledRejection', onRejection);
    }
  });

  it('asks no more once stopped during a backoff pause', async () => {
    const ask = vi.fn(unreachable);
    const stop = checkInBackground(ask, () => 'done', { everyMs: 20 });
    await eventually(() => expect(ask).toHaveBeenCalledTimes(1));
    stop();
    await sleep(100);
    expect(ask).toHaveBeenCalledTimes(1);
  });

  it('the version check says an old Redis that answers only after a long outage', async () => {
    const log = { error: vi.fn(), warn: vi.fn(), info: vi.fn() };
    let up = false;
    const late = {
      isCluster: false,
      options: { host: 'redis.example', port: 6379 },
      info: vi.fn(() =>
        up ? Promise.resolve('# Server\r\nredis_version:6.2.14\r\n') : unreachable(),
      ),
    };
    const stop = warnOfOldRedis(late as unknown as RedisClient, log as unknown as Logger, {
      everyMs: 2,
      maxBackoffMs: 4,
    });
    await eventually(() => expect(late.info.mock.calls.length).toBeGreaterThan(12), 2_000);
    up = true;
    await eventually(() => expect(log.error).toHaveBeenCalledTimes(1));
    expect(log.error.mock.calls[0]?.[0]).toEqual({
      redisVersion: '6.2.14',
      redis: 'redis.example:6379',
    });
    stop();
  });
});
