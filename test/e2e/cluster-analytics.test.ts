// Correct answers with N gateway replicas: one `hookgate operator`, two `hookgate
// gateway` processes over a real redis-server, and one real Prometheus scraping both
// (1 s scrapes). Known traffic is split across the gateways; the analytics API of
// either gateway (HOOKGATE_PROMETHEUS_URL) answers the whole traffic: exact counts,
// and the same figures the memory backend computes from the same histograms
// (buildResult over both gateways' /metrics). A live-stream subscriber on gateway A
// sees a request sent to gateway B within 1 s.
import type { ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  buildResult,
  type AnalyticsResult,
  type GroupTotals,
} from '../../runtime/analytics/backend.ts';
import { LATENCY_BUCKETS_SECONDS, LATENCY_CELLS } from '../../runtime/analytics/definitions.ts';
import { eventually, sleep } from '../support/eventually.ts';
import {
  skipWithoutPrometheus,
  startPrometheus,
  type RunningPrometheus,
} from '../support/prometheus.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';
import { spawnRole, startTestCluster, type TestCluster } from '../support/test-cluster.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { freePortRun } from '../support/ports.ts';

const ADMIN_TOKEN = 'e2e-admin-token-analytics-0123456789';
const INGEST = '/webhook/default_production_orders/ingest';
const SYNC = '/webhook/default_production_broken/sync';
const NOWHERE = '/webhook/default_production_orders/nowhere';

type Labels = Record<string, string>;
interface Series {
  labels: Labels;
  count: number;
  sum: number;
  /** Cumulative, by `le`. */
  buckets: Map<string, number>;
}

/** The request-duration histogram of a /metrics text, by series. */
function parseHistogram(text: string): Series[] {
  const series = new Map<string, Series>();
  const line = /^http_server_request_duration_seconds_(bucket|sum|count)\{(.*)\} (\S+)$/;
  for (const raw of text.split('\n')) {
    const m = line.exec(raw);
    if (!m) continue;
    const labels: Labels = {};
    for (const [, k, v] of (m[2] as string).matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g))
      labels[k as string] = v as string;
    const le = labels.le;
    delete labels.le;
    const key = JSON.stringify(labels);
    let s = series.get(key);
    if (!s) series.set(key, (s = { labels, count: 0, sum: 0, buckets: new Map() }));
    const value = Number(m[3]);
    if (m[1] === 'count') s.count = value;
    else if (m[1] === 'sum') s.sum = value;
    else s.buckets.set(le as string, value);
  }
  return [...series.values()];
}

/** What the memory backend computes from these series (the same buildResult). */
function expected(series: Series[], match: (l: Labels) => boolean): AnalyticsResult {
  const groups = new Map<string, GroupTotals>();
  const cells = new Float64Array(LATENCY_CELLS);
  for (const s of series.filter((x) => match(x.labels))) {
    const key = `${s.labels.http_request_method} ${s.labels.http_route} ${s.labels.http_response_status_code}`;
    const g = groups.get(key) ?? {
      method: s.labels.http_request_method as string,
      route: s.labels.http_route as string,
      statusCode: Number(s.labels.http_response_status_code),
      count: 0,
      sumSeconds: 0,
    };
    g.count += s.count;
    g.sumSeconds += s.sum;
    groups.set(key, g);
    let previous = 0;
    for (let i = 0; i < LATENCY_CELLS; i += 1) {
      const le = i < LATENCY_BUCKETS_SECONDS.length ? String(LATENCY_BUCKETS_SECONDS[i]) : '+Inf';
      const cumulative = s.buckets.get(le) ?? previous;
      cells[i] = (cells[i] as number) + cumulative - previous;
      previous = cumulative;
    }
  }
  return buildResult({
    groups: [...groups.values()],
    cells,
    limit: 10,
    from: 0,
    to: 0,
    points: [],
  });
}

/** Figures compared: counts exactly, averages and the P99 to their two-decimal rounding. */
function expectSame(actual: AnalyticsResult, wanted: AnalyticsResult): void {
  expect(actual.summary.totalSpans).toBe(wanted.summary.totalSpans);
  expect(actual.summary.errorCount).toBe(wanted.summary.errorCount);
  expect(actual.summary.errorRatePercent).toBe(wanted.summary.errorRatePercent);
  expect(actual.summary.avgP99LatencyMs).toBeCloseTo(wanted.summary.avgP99LatencyMs ?? NaN, 1);
  expect(actual.topByRequestCount).toEqual(wanted.topByRequestCount);
  const latency = (r: AnalyticsResult) =>
    r.topByLatency.map(({ avgLatencyMs: _, ...rest }) => rest);
  expect(latency(actual).sort(byKey)).toEqual(latency(wanted).sort(byKey));
  for (const row of actual.topByLatency) {
    const twin = wanted.topByLatency.find(
      (w) => w.method === row.method && w.path === row.path && w.statusCode === row.statusCode,
    );
    expect(Math.abs(row.avgLatencyMs - (twin?.avgLatencyMs ?? NaN))).toBeLessThanOrEqual(0.011);
  }
  const perMinute = actual.timeseries.points.reduce((n, p) => n + p.requests, 0);
  expect(perMinute).toBe(wanted.summary.totalSpans);
}
const byKey = (a: { method: string; path: string; statusCode: number }, b: typeof a) =>
  `${a.method}${a.path}${a.statusCode}`.localeCompare(`${b.method}${b.path}${b.statusCode}`);

describe.skipIf(!redisAvailable() || skipWithoutPrometheus())(
  'two gateways, one Prometheus, one live stream',
  () => {
    let cluster: TestCluster;
    let redis: RedisServer;
    let prometheus: RunningPrometheus;
    const children: ChildProcess[] = [];
    let a = 0;
    let b = 0;
    const admin = (port: number, path: string) =>
      fetch(`http://127.0.0.1:${port + 100}${path}`, {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      });

    function start(role: 'operator' | 'gateway', port: number, extra: Record<string, string> = {}) {
      children.push(spawnRole(cluster, redis.url, role, port, extra));
    }
    const apply = (plural: string, body: object) =>
      fetch(`${cluster.server.url}/apis/hookgate.dev/v1alpha1/namespaces/default/${plural}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const serves = (port: number, path: string) =>
      eventually(
        async () =>
          expect(
            (await fetch(`http://127.0.0.1:${port}${path}`, { method: 'OPTIONS' })).status,
          ).toBe(405), // the route is there (404 before), OPTIONS is not one of its methods
        20_000,
        100,
      );

    beforeAll(async () => {
      cluster = await startTestCluster({ crds: true });
      writeFileSync(join(cluster.dir, 'admin-token'), `${ADMIN_TOKEN}\n`);
      redis = await startRedis();
      const port = await freePortRun(8);
      a = port + 1;
      b = port + 2;
      prometheus = await startPrometheus([`127.0.0.1:${a}`, `127.0.0.1:${b}`]);
      start('operator', port);
      const gateway = {
        HOOKGATE_EXECUTIONS: 'inline',
        HOOKGATE_PROMETHEUS_URL: prometheus.url,
        HOOKGATE_PROMETHEUS_SELECTOR: 'job="hookgate"',
        HOOKGATE_PROMETHEUS_TIMEOUT_MS: '5000',
      };
      start('gateway', a, gateway);
      start('gateway', b, gateway);
      await apply('workflows', workflow('orders'));
      await apply(
        'workflows',
        workflow('broken', {
          application: 'billing',
          nodes: [{ id: 'a', type: 'transform', expression: '$error("boom")' }],
        }),
      );
      await apply('webhooktriggers', trigger('ingest', { pathSegment: 'ingest' }));
      await apply(
        'webhooktriggers',
        trigger('sync', {
          workflowRef: { name: 'broken' },
          pathSegment: 'sync',
          response: { mode: 'waitForCompletion' },
        }),
      );
      for (const p of [a, b]) {
        await serves(p, INGEST);
        await serves(p, SYNC);
      }
    }, 60_000);

    afterAll(async () => {
      for (const c of children) c.kill('SIGKILL');
      await prometheus?.stop();
      await cluster?.close();
      await redis?.stop();
    });

    it('a live-stream subscriber on A sees a request sent to B within 1 s', async () => {
      const controller = new AbortController();
      const res = await fetch(
        `http://127.0.0.1:${a + 100}/webhook-events${INGEST.slice('/webhook'.length)}`,
        {
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, accept: 'text/event-stream' },
          signal: controller.signal,
        },
      );
      expect(res.status).toBe(200);
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      const decoder = new TextDecoder();
      let buffer = '';
      const events: { event: string; data: Record<string, unknown> }[] = [];
      const pump = (async () => {
        for (;;) {
          const { value, done } = await reader
            .read()
            .catch(() => ({ value: undefined, done: true as const }));
          if (done) return;
          buffer += decoder.decode(value, { stream: true });
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const frame = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const event = /^event: (.*)$/m.exec(frame)?.[1];
            const data = /^data: (.*)$/m.exec(frame)?.[1];
            if (event && data)
              events.push({ event, data: JSON.parse(data) as Record<string, unknown> });
          }
        }
      })();
      await eventually(() => expect(events[0]?.event).toBe('connected'), 5000);
      const gatewayA = events[0]?.data.gateway;
      expect(typeof gatewayA).toBe('string');
      // The subscription is announced to the other gateways (Redis pub/sub, milliseconds).
      await sleep(300);
      const sent = Date.now();
      const answer = await fetch(`http://127.0.0.1:${b}${INGEST}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': 'live-from-b' },
        body: '{"orderId":1}',
      });
      expect(answer.status).toBe(202);
      await eventually(
        () =>
          expect(events.some((e) => e.event === 'response' && e.data.gateway !== gatewayA)).toBe(
            true,
          ),
        1000,
        10,
      );
      expect(Date.now() - sent).toBeLessThan(1000);
      const fromB = events.filter((e) => e.event !== 'connected');
      expect(fromB.map((e) => e.event)).toEqual(['request', 'response']);
      expect(fromB[0]?.data).toMatchObject({ method: 'POST', path: INGEST });
      expect(fromB[1]?.data).toMatchObject({ statusCode: 202 });
      expect(fromB[1]?.data.gateway).toBe(fromB[0]?.data.gateway);
      expect(fromB[1]?.data.seq).toBe((fromB[0]?.data.seq as number) + 1);
      controller.abort();
      await pump;
    });

    it('the analytics API of either gateway answers for the whole traffic', async () => {
      // Known traffic, alternating between the gateways.
      const plan: { method: string; path: string; body?: string }[] = [
        ...Array.from({ length: 40 }, () => ({ method: 'POST', path: INGEST, body: '{"n":1}' })),
        ...Array.from({ length: 12 }, () => ({ method: 'GET', path: INGEST })),
        ...Array.from({ length: 8 }, () => ({ method: 'POST', path: NOWHERE, body: '{}' })),
        ...Array.from({ length: 10 }, () => ({ method: 'POST', path: SYNC, body: '{"n":2}' })),
      ];
      const statuses = new Map<string, number>();
      let i = 0;
      for (const r of plan) {
        const port = i++ % 2 === 0 ? a : b;
        const res = await fetch(`http://127.0.0.1:${port}${r.path}`, {
          method: r.method,
          ...(r.body ? { body: r.body, headers: { 'content-type': 'application/json' } } : {}),
        });
        await res.arrayBuffer();
        const key = `${r.method} ${res.status}`;
        statuses.set(key, (statuses.get(key) ?? 0) + 1);
      }
      // The live-stream test sent one more POST to B.
      statuses.set('POST 202', (statuses.get('POST 202') ?? 0) + 1);
      const total = plan.length + 1;
      const errors = [...statuses]
        .filter(([k]) => /^\w+ (5\d\d|408)$/.test(k))
        .reduce((n, [, c]) => n + c, 0);
      expect(errors).toBeGreaterThan(0); // the broken workflow fails

      const summary = async (port: number, query = '') =>
        (await (
          await admin(port, `/api/analytics/summary?window=5m${query}`)
        ).json()) as AnalyticsResult;
      // Every answer counts, the OPTIONS probes that waited for the routes included.
      const series = [
        ...parseHistogram(await (await fetch(`http://127.0.0.1:${a}/metrics`)).text()),
        ...parseHistogram(await (await fetch(`http://127.0.0.1:${b}/metrics`)).text()),
      ];
      const count = (match: (l: Labels) => boolean) =>
        series.filter((x) => match(x.labels)).reduce((n, x) => n + x.count, 0);
      expect(count((l) => l.http_request_method !== 'OPTIONS')).toBe(total);
      const all = count(() => true);
      // Prometheus has both gateways' last counts one scrape after the traffic.
      await eventually(
        async () => {
          for (const p of [a, b]) {
            const r = await summary(p);
            expect(r.summary?.totalSpans, JSON.stringify(r).slice(0, 400)).toBe(all);
          }
        },
        20_000,
        250,
      );
      const filters: [string, (l: Labels) => boolean][] = [
        ['', () => true],
        ['&method=POST', (l) => l.http_request_method === 'POST'],
        ['&status=202', (l) => l.http_response_status_code === '202'],
        ['&application=shop', (l) => l.application === 'shop'],
        [
          '&environment=production&consumer=anonymous',
          (l) => l.environment === 'production' && l.consumer === 'anonymous',
        ],
      ];
      for (const port of [a, b]) {
        const whole = await summary(port);
        expect(whole.summary.errorCount).toBe(errors);
        for (const [k, n] of statuses) {
          const [method, status] = k.split(' ');
          const rows = whole.topByRequestCount.filter(
            (r) => r.method === method && r.statusCode === Number(status),
          );
          expect(
            rows.reduce((sum, r) => sum + r.count, 0),
            k,
          ).toBe(n);
        }
        for (const [query, match] of filters)
          expectSame(await summary(port, query), expected(series, match));
      }
      const options = (await (await admin(a, '/api/analytics/options?window=5m')).json()) as {
        applications: string[];
        routes: string[];
      };
      expect(options.applications).toEqual(expect.arrayContaining(['billing', 'shop']));
      expect(options.routes).toEqual(expect.arrayContaining([INGEST, SYNC]));
    }, 45_000);
  },
);
