import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FORGET_SERIES_AFTER_MS, forgetGoneSeries } from '../../runtime/analytics/forget-series.ts';
import { GatewayMetrics, METRIC, REQUEST_LABELS } from '../../runtime/analytics/metrics.ts';
import { LATENCY_BUCKETS_SECONDS } from '../../runtime/analytics/definitions.ts';
import { INVOICES, knownTraffic, ORDERS, STAGING, STATUS } from './traffic.ts';
import type { RequestObservation } from '../../runtime/gateway/observations.ts';

async function families(
  registry: Registry,
): Promise<Map<string, { type: string; labels: string[] }>> {
  const out = new Map<string, { type: string; labels: string[] }>();
  for (const m of await registry.getMetricsAsJSON()) {
    const labels = new Set<string>();
    for (const v of m.values) for (const k of Object.keys(v.labels)) labels.add(k);
    out.set(m.name, { type: String(m.type), labels: [...labels].sort() });
  }
  return out;
}

describe('gateway metrics', () => {
  it('pins the metric names, types and label names', async () => {
    const registry = new Registry();
    const metrics = new GatewayMetrics({
      registry,
      deadLetters: () => 2,
      queueOldestAge: () => 1.5,
    });
    knownTraffic(() => Date.now()).forEach((o) => metrics.observe(o));
    metrics.recordExecution('shop_production_orders', 'succeeded');
    metrics.recordDiscarded('shop_production_orders');
    metrics.recordRetry('automatic');
    metrics.recordRetry('dead_letter', 3);
    metrics.recordDeadLettered();
    metrics.recordRateLimitDecision('allowed');
    metrics.recordCallbackDelivery('delivered');
    metrics.setQueueDepth(3);
    metrics.addReplicaAcks({ confirmed: 5, unconfirmed: 1, failed: 0 });
    metrics.engineObserver().queueRefused('namespace_share');
    expect(Object.fromEntries(await families(registry))).toEqual({
      http_server_request_duration_seconds: {
        type: 'histogram',
        labels: [
          'application',
          'consumer',
          'environment',
          'http_request_method',
          'http_response_status_code',
          'http_route',
          'le',
        ],
      },
      hookgate_executions_total: { type: 'counter', labels: ['result', 'workflow_id'] },
      hookgate_executions_discarded_total: { type: 'counter', labels: ['workflow_id'] },
      hookgate_rejected_requests_total: { type: 'counter', labels: ['reason'] },
      hookgate_queue_depth: { type: 'gauge', labels: [] },
      hookgate_queue_oldest_age_seconds: { type: 'gauge', labels: [] },
      hookgate_queue_replica_acks_total: { type: 'counter', labels: ['result'] },
      hookgate_rate_limit_decisions_total: { type: 'counter', labels: ['decision'] },
      hookgate_callback_deliveries_total: { type: 'counter', labels: ['result'] },
      hookgate_dead_letters: { type: 'gauge', labels: [] },
      hookgate_dead_lettered_total: { type: 'counter', labels: [] },
      hookgate_execution_retries_total: { type: 'counter', labels: ['source'] },
      hookgate_engine_queue_refused_total: { type: 'counter', labels: ['reason'] },
    });
    const text = await registry.metrics();
    expect(text).toMatch(/^hookgate_dead_letters 2$/m);
    expect(text).toMatch(/^hookgate_queue_oldest_age_seconds 1.5$/m);
    expect(text).toMatch(/^hookgate_execution_retries_total\{source="dead_letter"\} 3$/m);
    expect(text).toMatch(/^hookgate_queue_replica_acks_total\{result="confirmed"\} 5$/m);
    expect(text).toMatch(/^hookgate_queue_replica_acks_total\{result="failed"\} 0$/m);
    expect(text).toMatch(/^hookgate_engine_queue_refused_total\{reason="namespace_share"\} 1$/m);
    expect(text).toMatch(/^hookgate_engine_queue_refused_total\{reason="queue_full"\} 0$/m);
    expect(Object.values(METRIC).sort()).toEqual([...(await families(registry)).keys()].sort());
    expect([...REQUEST_LABELS].sort()).toEqual([
      'application',
      'consumer',
      'environment',
      'http_request_method',
      'http_response_status_code',
      'http_route',
    ]);
  });

  it('uses the shared latency buckets from 1 ms to 30 s', async () => {
    const registry = new Registry();
    new GatewayMetrics({ registry }).observe(knownTraffic(() => 0)[0]!);
    const text = await registry.metrics();
    const bounds = [...text.matchAll(/_bucket\{le="([^"]+)"/g)].map((m) => m[1]);
    expect(bounds).toEqual([...LATENCY_BUCKETS_SECONDS.map(String), '+Inf']);
  });

  it('records each observation with its labels, and problems as rejections by type', async () => {
    const registry = new Registry();
    const metrics = new GatewayMetrics({ registry });
    knownTraffic(() => Date.now()).forEach((o) => metrics.observe(o));
    const text = await registry.metrics();
    expect(text).toContain(
      'http_server_request_duration_seconds_count{application="shop",environment="production",' +
        `http_request_method="POST",http_route="${ORDERS}",http_response_status_code="202",consumer="acme"} 240`,
    );
    expect(text).toContain('consumer="anonymous"');
    expect(text).toContain('hookgate_rejected_requests_total{reason="rate-limited"} 40');
    expect(text).toContain('hookgate_rejected_requests_total{reason="credentials-missing"} 10');
    expect(text).toContain('hookgate_rejected_requests_total{reason="request-timeout"} 10');
    expect(text).toContain('hookgate_rejected_requests_total{reason="execution-failed"} 120');
  });

  it('keeps the consumer and method labels bounded', async () => {
    const registry = new Registry();
    const metrics = new GatewayMetrics({ registry, consumers: { maxPerRoute: 2, allow: ['vip'] } });
    const base = knownTraffic(() => 0)[0]!;
    for (const consumer of ['a', 'b', 'c', 'd', 'vip']) metrics.observe({ ...base, consumer });
    metrics.observe({ ...base, method: 'PROPFIND', consumer: 'a' });
    const text = await registry.metrics();
    const consumers = [...text.matchAll(/_count\{[^}]*consumer="([^"]+)"\}/g)].map((m) => m[1]);
    expect(consumers.sort()).toEqual(['a', 'a', 'b', 'other', 'vip']);
    expect(text).toContain('http_request_method="_OTHER"');
  });

  it('reads the queue depth at scrape time when given a function', async () => {
    const registry = new Registry();
    let depth = 5;
    new GatewayMetrics({ registry, queueDepth: () => depth });
    expect(await registry.metrics()).toContain('hookgate_queue_depth 5');
    depth = 7;
    expect(await registry.metrics()).toContain('hookgate_queue_depth 7');
  });

  it('has a queue age gauge only where a queue is read; added later, it is read at scrape time', async () => {
    const registry = new Registry();
    const metrics = new GatewayMetrics({ registry });
    expect(await registry.metrics()).not.toContain('hookgate_queue_oldest_age_seconds');
    let age = 0;
    metrics.addQueueOldestAge(() => age);
    metrics.addQueueOldestAge(() => -1);
    expect(await registry.metrics()).toMatch(/^hookgate_queue_oldest_age_seconds 0$/m);
    age = 12.25;
    expect(await registry.metrics()).toMatch(/^hookgate_queue_oldest_age_seconds 12.25$/m);
  });

  it('counts executions, rate limit decisions and callback deliveries by label', async () => {
    const registry = new Registry();
    const metrics = new GatewayMetrics({ registry });
    metrics.recordExecution('wf', 'failed');
    metrics.recordExecution('wf', 'failed');
    metrics.recordRateLimitDecision('rejected');
    metrics.recordRateLimitDecision('failed_open');
    // As the engine reports them: a destination the outbound policy refused apart.
    const observer = metrics.engineObserver();
    observer.callbackDelivered({ delivered: false, refused: true });
    observer.callbackDelivered({ delivered: false });
    observer.callbackDelivered({ delivered: true });
    observer.executionFinished({ workflowId: 'wf', status: 'succeeded' });
    observer.executionDiscarded({ workflowId: 'wf' });
    const text = await registry.metrics();
    expect(text).toContain('hookgate_executions_discarded_total{workflow_id="wf"} 1');
    expect(text).toContain('hookgate_executions_total{workflow_id="wf",result="failed"} 2');
    expect(text).toContain('hookgate_executions_total{workflow_id="wf",result="succeeded"} 1');
    expect(text).toContain('hookgate_rate_limit_decisions_total{decision="rejected"} 1');
    expect(text).toContain('hookgate_rate_limit_decisions_total{decision="failed_open"} 1');
    for (const result of ['refused', 'failed', 'delivered'])
      expect(text).toContain(`hookgate_callback_deliveries_total{result="${result}"} 1`);
  });

  it('rate limit decisions add up across scrapes, every series there from the first at 0', async () => {
    const registry = new Registry();
    const metrics = new GatewayMetrics({ registry });
    // A counter that appears with its first increment hides that increment from rate().
    const first = await registry.metrics();
    for (const decision of ['allowed', 'rejected', 'shadowed', 'failed_open', 'failed_closed'])
      expect(first).toContain(`hookgate_rate_limit_decisions_total{decision="${decision}"} 0`);
    for (let i = 0; i < 3; i++) metrics.recordRateLimitDecision('allowed');
    expect(await registry.metrics()).toContain(
      'hookgate_rate_limit_decisions_total{decision="allowed"} 3',
    );
    metrics.recordRateLimitDecision('allowed');
    metrics.recordRateLimitDecision('allowed');
    metrics.recordRateLimitDecision('rejected');
    const text = await registry.metrics();
    expect(text).toContain('hookgate_rate_limit_decisions_total{decision="allowed"} 5');
    expect(text).toContain('hookgate_rate_limit_decisions_total{decision="rejected"} 1');
    expect(await registry.metrics()).toBe(text);
  });
});

describe('series of routes and workflows no longer served', () => {
  const routesIn = async (registry: Registry) => {
    const json = await registry.getMetricsAsJSON();
    const duration = json.find((m) => m.name === METRIC.requestDuration);
    return new Set(duration?.values.map((v) => String(v.labels.http_route)));
  };
  const workflowsIn = async (registry: Registry) => {
    const json = await registry.getMetricsAsJSON();
    const executions = json.find((m) => m.name === 'hookgate_executions_total');
    return new Set(executions?.values.map((v) => String(v.labels.workflow_id)));
  };

  const GRACE = 600_000;
  const MINUTE = 60_000;

  it('go once not served and not counted for the grace; a route served keeps them while idle under a day (consumer-labels.test.ts: after); unmatched stays', async () => {
    const registry = new Registry();
    let clock = Date.parse('2026-11-28T12:00:00Z');
    const metrics = new GatewayMetrics({ registry, now: () => clock });
    // Every request ends within 5 s after `start`.
    const start = clock;
    const traffic = knownTraffic(() => start);
    traffic.forEach((o) => metrics.observe(o));
    metrics.observe({ ...(traffic[0] as (typeof traffic)[number]), route: 'unmatched' });
    metrics.recordExecution('shop_production_orders', 'succeeded');
    metrics.recordExecution('billing_production_invoices', 'failed');
    metrics.recordExecution('billing_production_invoices', 'succeeded');
    metrics.recordDiscarded('billing_production_invoices');
    metrics.recordDiscarded('shop_production_orders');
    const all = await routesIn(registry);
    expect(all).toEqual(new Set([ORDERS, STATUS, INVOICES, STAGING, 'unmatched']));

    // INVOICES and its workflow are gone; STAGING too, but it is served again in time.
    const served = {
      routes: new Set([ORDERS, STATUS]),
      workflows: new Set(['shop_production_orders']),
    };
    clock = start + GRACE - 1;
    metrics.forgetGone(served, GRACE);
    expect(await routesIn(registry)).toEqual(all);
    clock = start + 5_000 + GRACE;
    metrics.forgetGone({ ...served, routes: new Set([ORDERS, STATUS, STAGING]) }, GRACE);
    expect(await routesIn(registry)).toEqual(new Set([ORDERS, STATUS, STAGING, 'unmatched']));
    expect(await workflowsIn(registry)).toEqual(new Set(['shop_production_orders']));
    expect(await registry.metrics()).not.toContain('billing_production_invoices');
    expect(await registry.metrics()).toContain(
      'hookgate_executions_discarded_total{workflow_id="shop_production_orders"} 1',
    );

    // Served, however long idle, a series stays; once not served, it goes at the next look.
    clock += 10 * GRACE;
    metrics.forgetGone({ ...served, routes: new Set([ORDERS, STATUS, STAGING]) }, GRACE);
    expect(await routesIn(registry)).toContain(STAGING);
    metrics.forgetGone(served, GRACE);
    expect(await routesIn(registry)).not.toContain(STAGING);
    expect(await routesIn(registry)).toEqual(new Set([ORDERS, STATUS, 'unmatched']));

    // A route deployed again starts from zero, under its own series.
    metrics.observe(traffic.find((o) => o.route === INVOICES) as (typeof traffic)[number]);
    expect(await routesIn(registry)).toContain(INVOICES);
  });

  it('the grace counts from the last count, not from the look that finds the route gone', async () => {
    const registry = new Registry();
    let clock = Date.parse('2026-11-28T12:00:00Z');
    const metrics = new GatewayMetrics({ registry, now: () => clock });
    const start = clock;
    const traffic = knownTraffic(() => start);
    traffic.forEach((o) => metrics.observe(o));
    metrics.recordExecution('idle_workflow', 'succeeded');
    metrics.recordExecution('busy_workflow', 'failed');
    // A minute before the look: one more request on INVOICES (answered in 0 s), one more
    // execution of busy_workflow. STAGING and idle_workflow have had nothing for an hour.
    clock = start + 59 * MINUTE;
    const lastCount = clock;
    const invoice = traffic.find((o) => o.route === INVOICES) as (typeof traffic)[number];
    metrics.observe({ ...invoice, at: lastCount, durationSeconds: 0 });
    metrics.recordExecution('busy_workflow', 'failed');
    clock += MINUTE;
    // The first look that finds all four gone: the idle ones go now, the others are
    // kept for what is left of their grace (9 minutes).
    const served = { routes: new Set([ORDERS, STATUS]), workflows: new Set<string>() };
    metrics.forgetGone(served, GRACE, clock);
    expect(await routesIn(registry)).toEqual(new Set([ORDERS, STATUS, INVOICES]));
    expect(await workflowsIn(registry)).toEqual(new Set(['busy_workflow']));
    clock = lastCount + GRACE - 1;
    metrics.forgetGone(served, GRACE, clock);
    expect(await routesIn(registry)).toEqual(new Set([ORDERS, STATUS, INVOICES]));
    expect(await workflowsIn(registry)).toEqual(new Set(['busy_workflow']));
    clock = lastCount + GRACE;
    metrics.forgetGone(served, GRACE, clock);
    expect(await routesIn(registry)).toEqual(new Set([ORDERS, STATUS]));
    expect(await workflowsIn(registry)).toEqual(new Set());
  });

  it('a request on a route that has gone, counted after the look, keeps its series another grace', async () => {
    const registry = new Registry();
    let clock = Date.parse('2026-11-28T12:00:00Z');
    const metrics = new GatewayMetrics({ registry, now: () => clock });
    const invoice = knownTraffic(() => clock).find((o) => o.route === INVOICES);
    metrics.observe({ ...(invoice as RequestObservation), durationSeconds: 0 });
    const served = { routes: new Set<string>(), workflows: new Set<string>() };
    clock += GRACE - MINUTE;
    metrics.forgetGone(served, GRACE);
    // A request that was in flight when the route went ends now (30 s after it came).
    metrics.observe({
      ...(invoice as RequestObservation),
      at: clock - 30_000,
      durationSeconds: 30,
    });
    clock += 2 * MINUTE;
    metrics.forgetGone(served, GRACE);
    expect(await routesIn(registry)).toEqual(new Set([INVOICES]));
    clock += GRACE - 2 * MINUTE;
    metrics.forgetGone(served, GRACE);
    expect(await routesIn(registry)).toEqual(new Set());
  });
});

describe('forgetGoneSeries: the minute look of a role', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('drops what its source says is gone after the grace, and shrugs off a failed read', async () => {
    const registry = new Registry();
    const metrics = new GatewayMetrics({ registry });
    metrics.recordExecution('kept', 'succeeded');
    metrics.recordExecution('unpublished', 'failed');
    let source: 'failing' | 'not loaded' | 'read' = 'failing';
    const stop = forgetGoneSeries(metrics, () => {
      if (source === 'failing') return Promise.reject(new Error('Redis is away'));
      if (source === 'not loaded') return undefined;
      return Promise.resolve({ routes: new Set<string>(), workflows: new Set(['kept']) });
    });
    // Longer than the grace: a read that fails, or a table not loaded yet, is no
    // evidence that anything went (a look that took either as "nothing served" would
    // drop both series here).
    await vi.advanceTimersByTimeAsync(2 * FORGET_SERIES_AFTER_MS);
    expect(await registry.metrics()).toContain('workflow_id="unpublished"');
    source = 'not loaded';
    await vi.advanceTimersByTimeAsync(2 * FORGET_SERIES_AFTER_MS);
    expect(await registry.metrics()).toContain('workflow_id="unpublished"');
    expect(await registry.metrics()).toContain('workflow_id="kept"');
    source = 'read';
    await vi.advanceTimersByTimeAsync(FORGET_SERIES_AFTER_MS + 60_000);
    const text = await registry.metrics();
    expect(text).not.toContain('unpublished');
    expect(text).toContain('workflow_id="kept"');
    stop();
  });
});
