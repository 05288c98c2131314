// The Prometheus backend against a real Prometheus scraping a real metrics endpoint:
// the analytics contract, and agreement with the memory backend on identical traffic.
import Fastify, { type FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnalyticsFilter, AnalyticsResult } from '../../runtime/analytics/backend.ts';
import { LATENCY_BUCKETS_SECONDS } from '../../runtime/analytics/definitions.ts';
import { MemoryAnalytics } from '../../runtime/analytics/memory.ts';
import { GatewayMetrics, METRIC } from '../../runtime/analytics/metrics.ts';
import {
  matchers,
  PrometheusAnalytics,
  promString,
  windowDelta,
} from '../../runtime/analytics/prometheus.ts';
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
  /**
   * A second scraped gateway that can "restart": its metrics start again from zero
   * under the same labels (same instance), like a container restarted in its pod.
   */
  restartable: { metrics: GatewayMetrics; restart(): GatewayMetrics };
}
let stack: Promise<Stack> | undefined;
const apps: FastifyInstance[] = [];
let prometheus: RunningPrometheus | undefined;

async function serve(registry: () => Registry): Promise<string> {
  const app = Fastify();
  apps.push(app);
  app.get('/metrics', async (_req, reply) => {
    void reply.type(registry().contentType);
    return registry().metrics();
  });
  return new URL(await app.listen({ host: '127.0.0.1', port: 0 })).host;
}

function shared(): Promise<Stack> {
  stack ??= (async () => {
    const registry = new Registry();
    const metrics = new GatewayMetrics({ registry });
    let second = new Registry();
    const restartable = {
      metrics: new GatewayMetrics({ registry: second }),
      restart(): GatewayMetrics {
        second = new Registry();
        restartable.metrics = new GatewayMetrics({ registry: second });
        return restartable.metrics;
      },
    };
    const targets = [await serve(() => registry), await serve(() => second)];
    prometheus = await startPrometheus(targets);
    return {
      metrics,
      backend: new PrometheusAnalytics({ url: prometheus.url }),
      url: prometheus.url,
      restartable,
    };
  })();
  return stack;
}

afterAll(async () => {
  await prometheus?.stop();
  await Promise.all(apps.map((app) => app.close()));
});

/** One instant PromQL query against the test's Prometheus: the values, by labels. */
async function promql(url: string, query: string, time = Date.now()): Promise<number[]> {
  const response = await fetch(`${url}/api/v1/query`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ query, time: String(time / 1000) }).toString(),
  });
  const answer = (await response.json()) as {
    status: string;
    error?: string;
    data: { result: { value: [number, string] }[] };
  };
  if (answer.status !== 'success') throw new Error(`${query}: ${answer.error}`);
  return answer.data.result.map((r) => Number(r.value[1]));
}

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
    // PromQL refuses a raw U+FFFD and an escaped lone surrogate (the exposition wrote U+FFFD).
    expect(promString('a\uFFFDb\uD800')).toBe('"a\\uFFFDb\\uFFFD"');
    const x = 'x_count{a="1"}';
    const created = 'last_over_time(x_created{a="1"}[5m])';
    const reset =
      `resets(${x}[5m]) > 0 or min_over_time(${x}[5m]) < last_over_time(${x}[2m] offset 5m)` +
      ` or ${created} > time() - 300`;
    // Born since the look-back began: 5m + 2m.
    const born = `${created} >= time() - 420`;
    expect(windowDelta(x, '5m')).toBe(
      `(last_over_time(${x}[5m]) - ((last_over_time(${x}[2m] offset 5m)` +
        ` unless ignoring(le) (${reset}))` +
        ` or min_over_time(${x}[5m]) * ignoring(le) group_left()` +
        ` (0 * (${reset} or ${born}) or 0 * min_over_time(${x}[5m]) + 1)))`,
    );
  });

  it('counts a window across a counter reset under the same labels (a restarted process)', async () => {
    const { restartable, url } = await shared();
    const [base] = randomTraffic(1, 7, () => Date.now(), 'restart');
    const selector = (suffix: string) =>
      `${METRIC.requestDuration}_${suffix}${matchers({ applications: ['restart'], window: '5m' })}`;
    const count = selector('count');
    const seen = (n: number) =>
      eventually(
        async () => (await promql(url, `sum(${count})`))[0] === n,
        20_000,
        `Prometheus to scrape ${n}`,
      );
    /** `fast` requests of 1 ms and `slow` ones of 1 s, all of one series. */
    const send = (metrics: GatewayMetrics, fast: number, slow: number) => {
      for (let i = 0; i < fast + slow; i += 1) {
        metrics.observe({ ...base!, at: Date.now(), durationSeconds: i < fast ? 0.001 : 1 });
      }
    };
    // Before the window: 100 requests (5 fast), scraped.
    send(restartable.metrics, 5, 95);
    await seen(100);
    await new Promise((r) => setTimeout(r, 1500));
    const start = Date.now();
    // In the window the process restarts (its counters start from zero under the same
    // labels) and answers 10 requests (7 fast; scraped), then 140 more (93 fast): 150 in
    // the window, 100 of them fast, more than the old counters held before the restart.
    // The fast bucket shows no reset of its own (5, then 7).
    const restarted = restartable.restart();
    send(restarted, 7, 3);
    await seen(10);
    send(restarted, 93, 47);
    await seen(150);
    const at = Date.now();
    const window = `${at - start}ms`;
    expect(await promql(url, `sum(${windowDelta(count, window)})`, at)).toEqual([150]);
    const fastBucket = `${METRIC.requestDuration}_bucket{application="restart",le="0.001"}`;
    const fast = await promql(url, `sum(${windowDelta(fastBucket, window, count)})`, at);
    expect(fast).toEqual([100]);
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
  it('answers label values with a replacement character, a newline and other unicode', async () => {
    // U+FFFD is what a token's invalid UTF-8 decodes to; PromQL's lexer refuses it raw in
    // a string literal.
    const { metrics, backend } = await shared();
    const now = Date.now();
    const consumer = 'bad\uFFFDsub\n\u2028\u{1F600}';
    const [o] = randomTraffic(1, 5, () => now - 10_000, 'odd-consumer');
    metrics.observe({ ...o!, consumer });
    const f: AnalyticsFilter = { applications: ['odd-consumer'], window: '5m', consumer };
    await settle(backend, f, 1);
    expect(
      (await backend.options({ applications: ['odd-consumer'], window: '5m' })).consumers,
    ).toEqual([consumer]);
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
