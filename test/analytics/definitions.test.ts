import { describe, expect, it } from 'vitest';
import {
  isErrorStatus,
  LATENCY_BUCKETS_SECONDS,
  LATENCY_CELLS,
  latencyCell,
  quantileFromCells,
} from '../../runtime/analytics/definitions.ts';

describe('analytics definitions', () => {
  it('has log-scale latency buckets from 1 ms to 30 s, each at most 28 % above the previous', () => {
    expect(LATENCY_BUCKETS_SECONDS[0]).toBe(0.001);
    expect(LATENCY_BUCKETS_SECONDS.at(-1)).toBe(30);
    expect(LATENCY_BUCKETS_SECONDS.length).toBe(46);
    for (let i = 1; i < LATENCY_BUCKETS_SECONDS.length; i += 1) {
      const ratio = LATENCY_BUCKETS_SECONDS[i]! / LATENCY_BUCKETS_SECONDS[i - 1]!;
      expect(ratio).toBeGreaterThan(1.19);
      expect(ratio).toBeLessThanOrEqual(1.28);
    }
  });

  it('puts a duration in the first bucket whose bound is >= the duration', () => {
    expect(latencyCell(0)).toBe(0);
    expect(latencyCell(0.001)).toBe(0);
    expect(latencyCell(0.0011)).toBe(1);
    expect(latencyCell(0.25)).toBe(LATENCY_BUCKETS_SECONDS.indexOf(0.25));
    expect(latencyCell(31)).toBe(LATENCY_CELLS - 1);
  });

  it('reads quantiles like PromQL histogram_quantile', () => {
    const cells = new Array<number>(LATENCY_CELLS).fill(0);
    expect(quantileFromCells(0.99, cells)).toBeNull();
    cells[latencyCell(0.01)] = 90; // (0.008, 0.01]
    cells[latencyCell(0.1)] = 10; // (0.08, 0.1]
    // rank 99: 9th of 10 in (0.08, 0.1]
    expect(quantileFromCells(0.99, cells)).toBeCloseTo(0.08 + 0.02 * 0.9, 12);
    // rank 50: 50th of 90 in (0.008, 0.01]
    expect(quantileFromCells(0.5, cells)).toBeCloseTo(0.008 + 0.002 * (50 / 90), 12);
    cells[LATENCY_CELLS - 1] = 1000; // beyond 30 s: the highest finite bound
    expect(quantileFromCells(0.99, cells)).toBe(30);
  });

  it('counts 5xx and 408 as errors, other statuses not', () => {
    expect([500, 502, 503, 599, 408].every(isErrorStatus)).toBe(true);
    expect([200, 202, 204, 301, 400, 401, 403, 404, 422, 429].some(isErrorStatus)).toBe(false);
  });
});
