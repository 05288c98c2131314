// The Prometheus backend against a real Prometheus scraping a real metrics endpoint:
// the analytics contract, and agreement with the memory backend on identical traffic.
import Fastify, { type FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnalyticsFilter, AnalyticsResult } from '../../runtime/analytics/backend.ts';
import { LATENCY_BUCKETS_SECONDS } from '../../runtime/analytics/definitions.ts';
import { MemoryAnalytics } from '../../runtime/analytics/memory.ts';
import { GatewayMetrics } from '../../runtime/analytics/metrics.ts';
import { matchers, PrometheusAnalytics, windowDelta } from '../../runtime/analytics/prometheus.ts';
import {
  eventually,
  skipWithoutPrometheus,
  startPrometheus,
  type RunningPrometheus,
} from '../support/prometheus.ts';
import { analyticsContract } from './contract.ts';
import { randomTraffic } from './traffic.ts';

const skip = skipWithoutPrometheus();

/** One Prometheus and one scraped metrics endpoint for the whole file. */
interface Stack {
  metrics: GatewayMetrics;
  backend: PrometheusAnalytics;
  url: string;
}
let stack: Promise<Stack> | undefined;
let app: FastifyInstance | undefined;
let prometheus: RunningPrometheus | undefined;

function shared(): Promise<Stack> {
  stack ??= (async () => {
    const registry = new Registry();
    const metrics = new GatewayMetrics({ registry });
    app = Fastify();
    app.get('/metrics', async (_req, reply) => {
      void reply.type(registry.contentType);
      return registry.metrics();
    });
    const address = await app.listen({ host: '127.0.0.1', port: 0 });
    prometheus = await startPrometheus([new URL(address).host]);
    return {
      metrics,
      backend: new PrometheusAnalytics({ url: prometheus.url }),
      url: prometheus.url,
    };
  })();
  return stack;
}

afterAll(async () => {
  await prometheus?.stop();
  await app?.close();
});

async function settle(backend: PrometheusAnalytics, filter: AnalyticsFilter, total: number) {
  await eventually(
    async () => (await backend.query(filter)).summary.totalSpans === total,
    20_000,
    `Prometheus to report ${total} requests`,
  );
}

describe.skipIf(skip)('prometheus analytics backend', () => {
  analyticsContract('prometheus', async () => {
    const { metrics, backend } = await shared();
    return {
      backend,
      record: (observations) => observations.forEach((o) => metrics.observe(o)),
      settle: (filter, total) => settle(backend, filter, total),
    };
  });

  describe('agreement with the memory backend on identical traffic', () => {
    // Both backends answer for the same instant, taken once Prometheus has scraped.
    let clock = Date.now();
    const memory = new MemoryAnalytics({ now: () => clock });
    let prom: PrometheusAnalytics;
    const filter = (extra: Partial<AnalyticsFilter> = {}): AnalyticsFilter => ({
      applications: ['agree'],
      environment: 'development',
      window: '5m',
      ...extra,
    });

    beforeAll(async () => {
      const { metrics, backend, url } = await shared();
      const now = Date.now();
      // Two methods keep the scraped page small (a few thousand lines).
      for (const [i, o] of randomTraffic(3000, 42, () => now - 10_000, 'agree').entries()) {
        const narrowed = { ...o, method: i % 3 === 0 ? 'GET' : 'POST' };
        metrics.observe(narrowed);
        memory.observe(narrowed);
      }
      await settle(backend, filter(), 3000);
      clock = Date.now();
      prom = new PrometheusAnalytics({ url, now: () => clock });
    });

    const filters: [string, Partial<AnalyticsFilter>][] = [
      ['no filter', {}],
      ['a method', { method: 'POST' }],
      ['a status code', { statusCode: 500 }],
      ['a consumer', { consumer: 'acme' }],
      ['anonymous callers', { consumer: 'anonymous' }],
      ['a 24 h window', { window: '24h' }],
    ];
    for (const [name, extra] of filters) {
      it(`agrees with ${name}`, async () => {
        const [m, p] = await Promise.all([memory.query(filter(extra)), prom.query(filter(extra))]);
        expectAgreement(m, p);
      });
    }

    it('agrees on the dropdown options', async () => {
      const [m, p] = await Promise.all([memory.options(filter()), prom.options(filter())]);
      expect(p.applications).toContain('agree');
      expect({ ...p, applications: [] }).toEqual({ ...m, applications: [] });
    });
  });

  it('escapes label values in PromQL', () => {
    const m = matchers({ applications: ['a.b', 'c"d'], window: '1h', consumer: 'x\\y' });
    expect(m).toBe('{application=~"a\\\\.b|c\\"d",consumer="x\\\\y"}');
    expect(windowDelta('x{a="1"}', '5m')).toBe(
      '((last_over_time(x{a="1"}[5m]) - last_over_time(x{a="1"}[2m] offset 5m)) >= 0' +
        ' or last_over_time(x{a="1"}[5m]))',
    );
  });

  it('answers label values with quotes and regex characters', async () => {
    const { metrics, backend } = await shared();
    const now = Date.now();
    const [o] = randomTraffic(1, 3, () => now - 10_000, 'we"ird.(app)|');
    metrics.observe({ ...o!, consumer: 'c\\"' });
    const f: AnalyticsFilter = {
      applications: ['we"ird.(app)|'],
      window: '5m',
      consumer: 'c\\"',
    };
    await settle(backend, f, 1);
  });
});

function expectAgreement(m: AnalyticsResult, p: AnalyticsResult): void {
  expect(p.from).toBe(m.from);
  expect(p.summary.totalSpans).toBe(m.summary.totalSpans);
  expect(p.summary.errorCount).toBe(m.summary.errorCount);
  expect(p.summary.errorRatePercent).toBe(m.summary.errorRatePercent);
  // Same bucket counts and the same interpolation: the same P99, which is within one
  // bucket of the true P99 (histogram resolution).
  if (m.summary.avgP99LatencyMs === null) {
    expect(p.summary.avgP99LatencyMs).toBeNull();
  } else {
    expect(p.summary.avgP99LatencyMs).toBeCloseTo(m.summary.avgP99LatencyMs, 6);
    const upper = LATENCY_BUCKETS_SECONDS.find((b) => b * 1000 >= m.summary.avgP99LatencyMs!);
    expect(upper).toBeDefined();
  }
  expect(p.topByRequestCount).toEqual(m.topByRequestCount);
  expect(p.topByLatency.map((r) => [r.method, r.path, r.statusCode, r.count])).toEqual(
    m.topByLatency.map((r) => [r.method, r.path, r.statusCode, r.count]),
  );
  p.topByLatency.forEach((r, i) => {
    expect(Math.abs(r.avgLatencyMs - (m.topByLatency[i]?.avgLatencyMs ?? NaN))).toBeLessThan(0.011);
  });
  const sum = (r: AnalyticsResult) => r.timeseries.points.reduce((n, x) => n + x.requests, 0);
  expect(sum(p)).toBe(sum(m));
  expect(p.timeseries.points.length).toBe(m.timeseries.points.length);
}
