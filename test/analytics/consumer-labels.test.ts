// The consumer label in /metrics and in the memory store, fed the same requests (as
// createAnalytics does with the memory backend): both give a request the same label,
// across a route's quiet day, the memory store's byte budget and a route that went and
// came back; and /metrics does not grow past the per-route cap doing it.
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { AnalyticsFilter } from '../../runtime/analytics/backend.ts';
import { forgetGoneSeries } from '../../runtime/analytics/forget-series.ts';
import { MemoryAnalytics } from '../../runtime/analytics/memory.ts';
import { GatewayMetrics, METRIC } from '../../runtime/analytics/metrics.ts';
import { fanOut } from '../../runtime/analytics/wiring.ts';
import type { RequestObservation } from '../../runtime/gateway/observations.ts';

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
const T0 = Date.parse('2026-11-28T08:00:10Z');
const ROUTE = '/webhook/shop_production_orders/ingest';
const OTHER_ROUTE = '/webhook/shop_production_orders/default';

const request = (at: number, consumer?: string, route = ROUTE): RequestObservation => ({
  application: 'shop',
  environment: 'production',
  workflowId: 'shop_production_orders',
  triggerKey: 'shop/orders',
  correlationId: 'c',
  requestId: 'r',
  method: 'POST',
  route,
  statusCode: 202,
  durationSeconds: 0.01,
  at,
  ...(consumer === undefined ? {} : { consumer }),
});

const window24h: AnalyticsFilter = { applications: [], window: '24h' };

/** The consumer label values /metrics has for `route` (from the histogram's `_count`). */
async function metricsConsumers(registry: Registry, route = ROUTE): Promise<string[]> {
  const json = await registry.getMetricsAsJSON();
  const duration = json.find((m) => m.name === METRIC.requestDuration);
  const values = (duration?.values ?? []).filter(
    // The histogram's values carry the series' name (prom-client's get() format).
    (v) =>
      (v as { metricName?: string }).metricName === `${METRIC.requestDuration}_count` &&
      v.labels.http_route === route,
  );
  return [...new Set(values.map((v) => String(v.labels.consumer)))].sort();
}

function setUp(options: { maxBytes?: number } = {}) {
  let now = T0;
  const registry = new Registry();
  const metrics = new GatewayMetrics({ registry, consumers: { maxPerRoute: 2 }, now: () => now });
  const memory = new MemoryAnalytics({
    now: () => now,
    consumers: { maxPerRoute: 2 },
    ...(options.maxBytes ? { maxBytes: options.maxBytes } : {}),
  });
  const observer = fanOut(metrics, memory);
  return {
    registry,
    metrics,
    memory,
    at: (t: number) => (now = t),
    send: (...consumers: (string | undefined)[]) => {
      for (const c of consumers) observer.observe(request(now, c));
    },
    /** The consumers the memory store offers for the last 24 h. */
    memoryConsumers: async () => (await memory.options(window24h)).consumers,
  };
}

describe('the consumer label, in /metrics and in the memory store', () => {
  it("a route served but idle for a day starts its consumers again in both; /metrics drops the old series, so it stays within the route's cap", async () => {
    const s = setUp();
    s.send('a', 'b', 'c');
    expect(await s.memoryConsumers()).toEqual(['a', 'b', 'other']);
    expect(await metricsConsumers(s.registry)).toEqual(['a', 'b', 'other']);
    // The route stays served (nothing says it went); a day without a request on it.
    s.at(T0 + DAY + MINUTE);
    s.send('c', 'd', 'a');
    expect(await s.memoryConsumers()).toEqual(['c', 'd', 'other']);
    expect(await metricsConsumers(s.registry)).toEqual(['c', 'd', 'other']);
  });

  it('a day less a minute is not idle: both keep the consumers they had', async () => {
    const s = setUp();
    s.send('a', 'b');
    s.at(T0 + DAY - MINUTE);
    s.send('c');
    // The 24 h window still holds the first minute: a and b are in it.
    expect(await s.memoryConsumers()).toEqual(['a', 'b', 'other']);
    expect(await metricsConsumers(s.registry)).toEqual(['a', 'b', 'other']);
  });

  it("the memory store's byte budget drops a route's series, not its consumers: the next one still folds, as in /metrics", async () => {
    const s = setUp({ maxBytes: 64 * 1024 });
    s.send('a', 'b');
    // Another route's traffic, minute after minute, until the budget drops the first minutes.
    for (let m = 1; m <= 120 && s.memory.stats().evictions.bytes === 0; m += 1) {
      s.at(T0 + m * MINUTE);
      for (let i = 0; i < 50; i += 1) {
        s.memory.observe(request(T0 + m * MINUTE, `x${i}`, `${OTHER_ROUTE}/${i}`));
      }
    }
    expect(s.memory.stats().evictions.bytes).toBeGreaterThan(0);
    expect(await s.memoryConsumers()).not.toContain('a');
    s.send('c');
    expect(await metricsConsumers(s.registry)).toEqual(['a', 'b', 'other']);
    expect(await s.memoryConsumers()).toContain('other');
    expect(await s.memoryConsumers()).not.toContain('c');
  });

  it('a route that went (its /metrics series dropped) and came back within the day labels its consumers as before, in both', async () => {
    const s = setUp();
    s.send('a', 'b');
    s.at(T0 + 15 * MINUTE);
    s.metrics.forgetGone({ routes: new Set(), workflows: new Set() }, 10 * MINUTE);
    expect(await metricsConsumers(s.registry)).toEqual([]);
    s.at(T0 + 20 * MINUTE);
    s.send('c', 'a');
    expect(await metricsConsumers(s.registry)).toEqual(['a', 'other']);
    expect(await s.memoryConsumers()).toEqual(['a', 'b', 'other']);
  });
});

describe("a route's /metrics series after a quiet day", () => {
  beforeEach(() => vi.useFakeTimers({ now: T0 }));
  afterEach(() => vi.useRealTimers());

  it("go at the role's minute look, served or not, unmatched too; a route with traffic keeps its series", async () => {
    const registry = new Registry();
    const metrics = new GatewayMetrics({ registry });
    metrics.observe(request(Date.now(), 'a'));
    metrics.observe(request(Date.now(), undefined, 'unmatched'));
    const served = { routes: new Set([ROUTE, OTHER_ROUTE]), workflows: new Set<string>() };
    const stop = forgetGoneSeries(metrics, () => served);
    // OTHER_ROUTE has a request every hour.
    const busy = setInterval(
      () => metrics.observe(request(Date.now(), 'z', OTHER_ROUTE)),
      3_600_000,
    );
    try {
      await vi.advanceTimersByTimeAsync(DAY - 2 * MINUTE);
      expect(await metricsConsumers(registry)).toEqual(['a']);
      expect(await metricsConsumers(registry, 'unmatched')).toEqual(['anonymous']);
      await vi.advanceTimersByTimeAsync(3 * MINUTE);
      expect(await metricsConsumers(registry)).toEqual([]);
      expect(await metricsConsumers(registry, 'unmatched')).toEqual([]);
      expect(await metricsConsumers(registry, OTHER_ROUTE)).toEqual(['z']);
    } finally {
      clearInterval(busy);
      stop();
    }
  });
});
