import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryAnalytics } from '../../runtime/analytics/memory.ts';
import { analyticsRoutes, problemErrorHandler } from '../../runtime/analytics/routes.ts';
import { parseFilter } from '../../runtime/analytics/filter.ts';
import type { AnalyticsFilter, AnalyticsResult } from '../../runtime/analytics/backend.ts';
import type { ProblemDocument } from '../../runtime/errors.ts';
import { analyticsOfKnownTraffic, knownTraffic, ORDERS } from './traffic.ts';

type Summary = AnalyticsResult & { filter: AnalyticsFilter };

describe('analytics API', () => {
  let app: FastifyInstance;

  beforeAll(async () => {
    const backend = analyticsOfKnownTraffic();
    app = Fastify();
    app.setErrorHandler(problemErrorHandler);
    await app.register(analyticsRoutes, { backend });
    await app.ready();
  });
  afterAll(() => app.close());

  it('answers the cards, both top lists and the series in one document', async () => {
    const res = await app.inject(
      '/api/analytics/summary?application=shop,billing&environment=production&window=15m',
    );
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const body = res.json<Summary>();
    expect(body.filter).toEqual({
      applications: ['shop', 'billing'],
      environment: 'production',
      window: '15m',
    });
    expect(body.summary).toEqual({
      totalSpans: 1000,
      avgP99LatencyMs: 250,
      errorCount: 30,
      errorRatePercent: 3,
    });
    expect(body.topByRequestCount[0]).toEqual({
      method: 'POST',
      path: ORDERS,
      statusCode: 202,
      count: 480,
      sharePercent: 48,
    });
    expect(body.topByLatency[0]?.avgLatencyMs).toBe(5000);
    expect(body.timeseries.points).toHaveLength(15);
    expect(Date.parse(body.to) - Date.parse(body.from)).toBeLessThanOrEqual(15 * 60_000);
  });

  it('takes repeated parameters, lower-case methods and a status code', async () => {
    const res = await app.inject(
      '/api/analytics/summary?application=shop&application=billing&method=post&status=500&window=24h',
    );
    expect(res.statusCode).toBe(200);
    expect(res.json<Summary>().summary.totalSpans).toBe(20);
  });

  it('defaults to all applications and environments over the last hour', async () => {
    const body = (await app.inject('/api/analytics/summary')).json<Summary>();
    expect(body.filter).toEqual({ applications: [], window: '1h' });
    expect(body.summary.totalSpans).toBe(1100);
    expect(body.timeseries.points).toHaveLength(60);
  });

  it('lists the dropdown values', async () => {
    const res = await app.inject('/api/analytics/options?environment=production');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      applications: ['billing', 'shop'],
      methods: ['GET', 'POST'],
      statusCodes: [200, 202, 401, 408, 429, 500],
    });
  });

  it('offers no empty application or consumer (requests that matched no endpoint)', async () => {
    const backend = new MemoryAnalytics();
    const now = Date.now();
    knownTraffic(() => now - 10_000).forEach((o) => backend.observe(o));
    backend.observe({
      at: now - 10_000,
      application: '',
      environment: '',
      workflowId: '',
      triggerKey: '',
      method: 'POST',
      route: 'unmatched',
      statusCode: 404,
      durationSeconds: 0.001,
      problem: 'HG_ERR_ROUTE_NOT_FOUND',
      correlationId: '',
      requestId: 'r-1',
    });
    const options = await backend.options(parseFilter({}));
    expect(options.applications).toEqual(['billing', 'shop']);
    expect(options.consumers).not.toContain('');
    expect(options.routes).toContain('unmatched');
  });

  it('filters by a consumer id with a comma, as the options list it (a JWT sub like CN=a,O=b)', async () => {
    const backend = new MemoryAnalytics();
    const now = Date.now();
    const [sample] = knownTraffic(() => now - 10_000);
    const consumer = 'CN=acme,O=Example Corp';
    backend.observe({ ...sample!, consumer });
    const local = Fastify();
    local.setErrorHandler(problemErrorHandler);
    await local.register(analyticsRoutes, { backend });
    const options = (await local.inject('/api/analytics/options')).json<{ consumers: string[] }>();
    expect(options.consumers).toContain(consumer);
    const query = new URLSearchParams({ consumer }).toString();
    const res = await local.inject(`/api/analytics/summary?${query}`);
    expect(res.statusCode).toBe(200);
    expect(res.json<Summary>().filter.consumer).toBe(consumer);
    expect(res.json<Summary>().summary.totalSpans).toBe(1);
    expect((await local.inject('/api/analytics/summary?consumer=a&consumer=b')).statusCode).toBe(
      400,
    );
    await local.close();
  });

  const bad: [string, string, RegExp][] = [
    ['window=7m', '#/query/window', /window must be one of 5m, 15m/],
    ['window=48h', '#/query/window', /longer than 24h/],
    ['window=2d', '#/query/window', /longer than 24h/],
    ['status=2xx', '#/query/status', /integer from 100 to 599/],
    ['status=99', '#/query/status', /integer from 100 to 599/],
    ['status=200&status=500', '#/query/status', /one value/],
    ['environment=prod', '#/query/environment', /development, staging, production/],
    ['method=BREW', '#/query/method', /method must be one of/],
    ['limit=0', '#/query/limit', /integer from 1 to 100/],
    ['windw=1h', '#/query/windw', /unknown parameter/],
  ];
  for (const [query, pointer, detail] of bad) {
    it(`rejects ${query} with a problem pointing at ${pointer}`, async () => {
      for (const path of ['/api/analytics/summary', '/api/analytics/options']) {
        const res = await app.inject(`${path}?${query}`);
        expect(res.statusCode).toBe(400);
        expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
        const problem = res.json<ProblemDocument>();
        expect(problem).toMatchObject({
          type: 'https://hookgate.dev/problems/invalid-parameter',
          title: 'Invalid query or path parameter',
          status: 400,
          code: 'HG_ERR_INVALID_PARAMETER',
          instance: path,
        });
        expect(problem.detail).toMatch(detail);
        expect(problem.errors?.map((e) => e.pointer)).toEqual([pointer]);
        expect(problem.errors?.[0]?.detail).toMatch(detail);
      }
    });
  }

  it('reports every bad parameter at once', async () => {
    const res = await app.inject('/api/analytics/summary?window=1y&environment=x&status=abc');
    expect(res.json<ProblemDocument>().errors?.map((e) => e.pointer)).toEqual([
      '#/query/window',
      '#/query/environment',
      '#/query/status',
    ]);
  });
});
