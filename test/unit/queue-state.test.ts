// The drain rate and the Retry-After of a full queue (runtime/engine/queue-state.ts);
// the reads themselves run against a real redis-server in test/engine/queue.test.ts.
import { describe, expect, it } from 'vitest';
import {
  DrainRate,
  entryTime,
  retryAfterSeconds,
  type QueueState,
} from '../../runtime/engine/queue-state.ts';

const state = (at: number, removed: number | undefined): QueueState => ({
  depth: 0,
  oldestAgeSeconds: 0,
  removed,
  at,
});

describe('queue state', () => {
  it('reads the Redis clock out of a stream entry id', () => {
    expect(entryTime('1795467819220-0')).toBe(1795467819220);
    expect(entryTime('5-12')).toBe(5);
  });

  it('measures jobs finished per second over its window, not before two reads span 500 ms', () => {
    const rate = new DrainRate(10_000);
    rate.observe(state(0, 100));
    expect(rate.perSecond).toBeUndefined();
    rate.observe(state(400, 104));
    expect(rate.perSecond).toBeUndefined();
    rate.observe(state(1_000, 110));
    expect(rate.perSecond).toBe(10);
    // Older samples leave the window: the rate follows the recent pace.
    for (let t = 2_000; t <= 20_000; t += 1_000) rate.observe(state(t, 110 + (t - 1_000) / 500));
    expect(rate.perSecond).toBeCloseTo(2, 5);
  });

  it('starts again when the count goes back (a Redis that lost its data) or is unknown (Redis 6)', () => {
    const rate = new DrainRate();
    rate.observe(state(0, 50));
    rate.observe(state(1_000, 60));
    expect(rate.perSecond).toBe(10);
    rate.observe(state(2_000, 3));
    expect(rate.perSecond).toBeUndefined();
    rate.observe(state(3_000, 8));
    expect(rate.perSecond).toBe(5);
    rate.observe(state(4_000, undefined));
    expect(rate.perSecond).toBeUndefined();
  });

  it('advises the time to free a tenth of the bound at the pace measured, from 1 s to the longest', () => {
    expect(retryAfterSeconds({ depth: 1_000, bound: 1_000, drainPerSecond: 50 })).toBe(2);
    expect(retryAfterSeconds({ depth: 1_000, bound: 1_000, drainPerSecond: 5 })).toBe(20);
    expect(retryAfterSeconds({ depth: 1_000, bound: 1_000, drainPerSecond: 1_000 })).toBe(1);
    // Over the bound (jobs in flight when it was read): that much more to drain first.
    expect(retryAfterSeconds({ depth: 1_100, bound: 1_000, drainPerSecond: 50 })).toBe(4);
    // Nothing drains, or the pace is not known: the longest advice.
    expect(retryAfterSeconds({ depth: 10, bound: 10, drainPerSecond: 0 })).toBe(60);
    expect(retryAfterSeconds({ depth: 10, bound: 10, drainPerSecond: undefined })).toBe(60);
    expect(retryAfterSeconds({ depth: 10, bound: 10, drainPerSecond: 0.001, maxSeconds: 30 })).toBe(
      30,
    );
    expect(retryAfterSeconds({ depth: 2, bound: 2, drainPerSecond: 0.5 })).toBe(2);
  });
});
