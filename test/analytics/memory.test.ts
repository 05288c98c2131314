import { describe, expect, it } from 'vitest';
import { MemoryAnalytics } from '../../runtime/analytics/memory.ts';
import type { AnalyticsFilter } from '../../runtime/analytics/backend.ts';
import { LATENCY_BUCKETS_SECONDS } from '../../runtime/analytics/definitions.ts';
import { analyticsContract } from './contract.ts';
import { knownTraffic, randomTraffic } from './traffic.ts';

analyticsContract('memory', () => {
  const store = new MemoryAnalytics();
  return Promise.resolve({
    backend: store,
    record: (observations) => observations.forEach((o) => store.observe(o)),
    settle: () => Promise.resolve(),
  });
});

const MINUTE = 60_000;
const T0 = Date.parse('2026-11-23T08:00:30Z');
const all = (extra: Partial<AnalyticsFilter> = {}): AnalyticsFilter => ({
  applications: [],
  window: '1h',
  ...extra,
});

describe('memory analytics store', () => {
  it('counts a request in the minute it finished, and a window covers its last minutes', async () => {
    let now = T0;
    const store = new MemoryAnalytics({ now: () => now });
    // one request per minute for the last 40 minutes, ending at T0
    for (const o of randomTraffic(40, 1, (i) => T0 - i * MINUTE - 20_000)) {
      store.observe({ ...o, durationSeconds: 0.01 });
    }
    expect((await store.query(all({ window: '5m' }))).summary.totalSpans).toBe(5);
    expect((await store.query(all({ window: '15m' }))).summary.totalSpans).toBe(15);
    expect((await store.query(all({ window: '30m' }))).summary.totalSpans).toBe(30);
    expect((await store.query(all({ window: '1h' }))).summary.totalSpans).toBe(40);
    const { timeseries, from } = await store.query(all({ window: '5m' }));
    expect(from).toBe('2026-11-23T07:56:00.000Z');
    expect(timeseries.points.map((p) => [p.at, p.requests])).toEqual([
      ['2026-11-23T07:56:00.000Z', 1],
      ['2026-11-23T07:57:00.000Z', 1],
      ['2026-11-23T07:58:00.000Z', 1],
      ['2026-11-23T07:59:00.000Z', 1],
      ['2026-11-23T08:00:00.000Z', 1],
    ]);
    now += 10 * MINUTE;
    expect((await store.query(all({ window: '5m' }))).summary.totalSpans).toBe(0);
  });

  it('forgets minutes older than 24 h and the series only they held', async () => {
    let now = T0;
    const store = new MemoryAnalytics({ now: () => now });
    store.observe({ ...knownTraffic(() => T0)[0]!, application: 'old' });
    expect(store.stats()).toMatchObject({ minutes: 1, series: 1 });
    now = T0 + 24 * 60 * MINUTE;
    store.observe({ ...knownTraffic(() => now)[0]!, application: 'new' });
    expect(store.stats()).toMatchObject({ minutes: 1, series: 1, droppedObservations: 0 });
    const { summary } = await store.query(all({ window: '24h' }));
    expect(summary.totalSpans).toBe(1);
    expect((await store.options(all({ window: '24h' }))).applications).toEqual(['new']);
    // a late observation from before the retention is dropped, not stored
    store.observe({ ...knownTraffic(() => T0)[0]!, application: 'late' });
    expect(store.stats()).toMatchObject({ series: 1, droppedObservations: 1 });
  });

  it('accepts late observations for minutes already sealed', async () => {
    const store = new MemoryAnalytics({ now: () => T0 });
    const base = knownTraffic(() => T0)[0]!;
    store.observe({ ...base, at: T0 - 10 * MINUTE, durationSeconds: 0.01 });
    store.observe({ ...base, at: T0, durationSeconds: 0.01 }); // seals the older minute
    store.observe({ ...base, at: T0 - 10 * MINUTE, durationSeconds: 0.5 }); // late
    store.observe({ ...base, at: T0 - 10 * MINUTE, route: '/webhook/late/x' });
    store.observe({ ...base, at: T0 + MINUTE }); // seals it again
    const { summary, timeseries, topByLatency } = await store.query(all({ window: '15m' }));
    expect(summary.totalSpans).toBe(4);
    expect(timeseries.points.find((p) => p.at === '2026-11-23T07:50:00.000Z')?.requests).toBe(3);
    expect(topByLatency.map((r) => [r.path, r.count])).toEqual([
      [base.route, 3],
      ['/webhook/late/x', 1],
    ]);
  });

  it('drops observations with an invalid time or duration', () => {
    const store = new MemoryAnalytics({ now: () => T0 });
    const base = knownTraffic(() => T0)[0]!;
    store.observe({ ...base, at: Number.NaN });
    store.observe({ ...base, durationSeconds: Number.NaN });
    store.observe({ ...base, durationSeconds: -1 });
    expect(store.stats()).toMatchObject({ minutes: 0, series: 0, droppedObservations: 3 });
  });

  it('caps the number of series and counts what it drops', async () => {
    const store = new MemoryAnalytics({ now: () => T0, maxSeries: 3 });
    for (const route of ['/webhook/a/x', '/webhook/b/x', '/webhook/c/x', '/webhook/d/x']) {
      store.observe({ ...knownTraffic(() => T0)[0]!, route });
    }
    expect(store.stats()).toMatchObject({ series: 3, droppedObservations: 1 });
    expect((await store.query(all())).summary.totalSpans).toBe(3);
  });

  it('stays within its byte budget: the oldest minutes and their series go first', async () => {
    const maxBytes = 256 * 1024;
    let now = T0;
    const store = new MemoryAnalytics({ now: () => now, maxBytes });
    const base = knownTraffic(() => T0)[0]!;
    const minutes = 6 * 60;
    let largest = 0;
    for (let m = 0; m < minutes; m += 1) {
      now = T0 + m * MINUTE;
      // 40 series of their own each minute (routes of the minute), 3 requests each.
      for (let i = 0; i < 40; i += 1) {
        for (let r = 0; r < 3; r += 1) {
          store.observe({
            ...base,
            at: now,
            route: `/webhook/team/m${m}-r${i}`,
            durationSeconds: 0.001 * (r + 1),
          });
        }
      }
      largest = Math.max(largest, store.stats().bytes);
    }
    const stats = store.stats();
    expect(largest).toBeLessThanOrEqual(maxBytes);
    expect(stats.bytes).toBeGreaterThan(0);
    expect(stats.evictions.bytes).toBeGreaterThan(0);
    expect(stats.evictions.expired).toBe(0);
    // What is left is the newest minutes, whole; the series of dropped minutes are gone.
    expect(stats.minutes).toBeLessThan(minutes);
    expect(stats.series).toBe(stats.minutes * 40);
    expect(stats.entries).toBe(stats.minutes * 40);
    const recent = await store.query(all({ window: '5m' }));
    expect(recent.summary.totalSpans).toBe(5 * 40 * 3);
    const day = await store.query(all({ window: '24h' }));
    expect(day.summary.totalSpans).toBe(stats.minutes * 40 * 3);
    // A late observation for a dropped minute is dropped, not stored again.
    const dropped = stats.droppedObservations;
    store.observe({ ...base, at: T0, route: '/webhook/team/late' });
    expect(store.stats()).toMatchObject({ droppedObservations: dropped + 1 });
    expect((await store.options(all({ window: '24h' }))).routes).not.toContain(
      '/webhook/team/late',
    );
  });

  it('with room to spare drops nothing, and gives the bytes back as minutes expire', () => {
    let now = T0;
    const store = new MemoryAnalytics({ now: () => now });
    const base = knownTraffic(() => T0)[0]!;
    for (let i = 0; i < 100; i += 1) store.observe({ ...base, route: `/webhook/a/r${i}` });
    const full = store.stats();
    expect(full.evictions).toEqual({ bytes: 0, count: 0, expired: 0 });
    expect(full.bytes).toBeGreaterThan(100 * 200);
    now = T0 + 24 * 60 * MINUTE;
    store.observe({ ...base, at: now });
    const later = store.stats();
    expect(later.evictions.expired).toBe(100);
    expect(later.series).toBe(1);
    expect(later.bytes).toBeLessThan(full.bytes / 10);
  });

  it('folds consumers beyond the per-route cap into "other", keeping allow-listed ones', async () => {
    const store = new MemoryAnalytics({
      now: () => T0,
      consumers: { maxPerRoute: 2, allow: ['vip'] },
    });
    const base = knownTraffic(() => T0)[0]!;
    for (const consumer of ['a', 'b', 'c', 'd', 'vip', 'a', undefined]) {
      const { consumer: _omit, ...rest } = base;
      store.observe(consumer === undefined ? rest : { ...rest, consumer });
    }
    const options = await store.options(all());
    expect(options.consumers).toEqual(['a', 'anonymous', 'b', 'other', 'vip']);
    expect((await store.query(all({ consumer: 'other' }))).summary.totalSpans).toBe(2);
    expect((await store.query(all({ consumer: 'a' }))).summary.totalSpans).toBe(2);
  });

  it("forgets a route's consumers once its last series is gone (a trigger deleted, deployed again)", async () => {
    let now = T0;
    const store = new MemoryAnalytics({ now: () => now, consumers: { maxPerRoute: 2 } });
    const base = knownTraffic(() => T0)[0]!;
    for (const consumer of ['a', 'b']) store.observe({ ...base, at: now, consumer });
    expect((await store.options(all())).consumers).toEqual(['a', 'b']);
    // A day without a request on it: its minutes and series left; so do its consumers,
    // as the gateway's metrics drop theirs, and the first two seen now are themselves.
    now = T0 + 25 * 60 * MINUTE;
    for (const consumer of ['c', 'd']) store.observe({ ...base, at: now, consumer });
    expect(store.stats().series).toBe(2);
    expect((await store.options(all())).consumers).toEqual(['c', 'd']);
  });

  it('reads the P99 within one histogram bucket of the exact P99', async () => {
    const store = new MemoryAnalytics({ now: () => T0 });
    const traffic = randomTraffic(10_000, 7, (i) => T0 - (i % 50) * MINUTE);
    traffic.forEach((o) => store.observe(o));
    const sorted = traffic.map((o) => o.durationSeconds).sort((a, b) => a - b);
    const exact = (sorted[Math.ceil(0.99 * sorted.length) - 1] as number) * 1000;
    const { summary } = await store.query(all());
    const upper = LATENCY_BUCKETS_SECONDS.find((b) => b * 1000 >= exact) as number;
    const lower = LATENCY_BUCKETS_SECONDS[LATENCY_BUCKETS_SECONDS.indexOf(upper) - 1] as number;
    expect(summary.avgP99LatencyMs).toBeGreaterThanOrEqual(lower * 1000);
    expect(summary.avgP99LatencyMs).toBeLessThanOrEqual(upper * 1000);
    expect(Math.abs((summary.avgP99LatencyMs as number) - exact) / exact).toBeLessThan(0.25);
  });

  it('computes averages from the recorded sums', async () => {
    const store = new MemoryAnalytics({ now: () => T0 });
    const base = knownTraffic(() => T0)[0]!;
    for (const d of [0.001, 0.002, 0.0031]) store.observe({ ...base, durationSeconds: d });
    const { topByLatency } = await store.query(all());
    expect(topByLatency).toEqual([
      { method: 'POST', path: base.route, statusCode: 202, count: 3, avgLatencyMs: 2.03 },
    ]);
  });
});
