import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import type { AnalyticsResult } from '../../runtime/analytics/backend.ts';
import { problemErrorHandler } from '../../runtime/analytics/routes.ts';
import { createAnalytics, fanOut } from '../../runtime/analytics/wiring.ts';
import { PrometheusAnalytics } from '../../runtime/analytics/prometheus.ts';
import { probes } from '../../roles/probes.ts';
import { knownTraffic } from './traffic.ts';

describe('analytics wiring', () => {
  let app: FastifyInstance | undefined;
  afterEach(() => app?.close());

  async function build(setup: ReturnType<typeof createAnalytics>): Promise<FastifyInstance> {
    app = Fastify();
    app.setErrorHandler(problemErrorHandler);
    for (const plugin of setup.plugins) await app.register(async (scope) => plugin(scope));
    await app.register(probes, { registry: setup.registry });
    await app.ready();
    return app;
  }

  it('feeds the metrics and the memory store from one observer and serves all three parts', async () => {
    const analytics = createAnalytics();
    const a = await build(analytics);
    const now = Date.now();
    knownTraffic(() => now - 10_000).forEach((o) => analytics.observer.observe(o));
    analytics.metrics.recordExecution('wf', 'succeeded');

    const metrics = await a.inject('/metrics');
    expect(metrics.statusCode).toBe(200);
    expect(metrics.headers['content-type']).toMatch(/^text\/plain/);
    expect(metrics.body).toContain('http_server_request_duration_seconds_count{');
    expect(metrics.body).toContain(
      'hookgate_executions_total{workflow_id="wf",result="succeeded"} 1',
    );

    const summary = await a.inject('/api/analytics/summary?window=5m');
    expect(summary.json<AnalyticsResult>().summary.totalSpans).toBe(1100);

    const page = await a.inject('/dashboard');
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['content-security-policy']).toContain("script-src 'self'");
    expect(page.body).toContain('<script type="module" src="/dashboard/app.js">');
    const js = await a.inject('/dashboard/app.js');
    expect(js.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect((await a.inject('/dashboard/styles.css')).headers['content-type']).toMatch(/^text\/css/);
    expect((await a.inject('/dashboard/../package.json')).statusCode).toBe(404);
    expect((await a.inject('/dashboard/secret.txt')).statusCode).toBe(404);
  });

  it('uses Prometheus as the backend when configured, with the metrics as the only observer', () => {
    const analytics = createAnalytics({
      backend: { kind: 'prometheus', url: 'http://127.0.0.1:9' },
      dashboard: false,
    });
    expect(analytics.backend).toBeInstanceOf(PrometheusAnalytics);
    expect(analytics.observer).toBe(analytics.metrics);
    expect(analytics.plugins).toHaveLength(1);
  });

  it('answers a problem when Prometheus cannot be reached', async () => {
    const a = await build(
      createAnalytics({
        backend: { kind: 'prometheus', url: 'http://127.0.0.1:9', timeoutMs: 2000 },
      }),
    );
    const res = await a.inject('/api/analytics/summary');
    expect(res.statusCode).toBe(503);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.json()).toMatchObject({ code: 'HG_ERR_ANALYTICS_UNAVAILABLE' });
    expect(res.body).not.toContain('127.0.0.1');
  });

  it('fans out to every observer even when one throws', () => {
    const seen: string[] = [];
    const observer = fanOut(
      { observe: () => seen.push('a') },
      {
        observe: () => {
          throw new Error('boom');
        },
      },
      { observe: () => seen.push('c') },
    );
    observer.observe(knownTraffic(() => 0)[0]!);
    expect(seen).toEqual(['a', 'c']);
  });
});
