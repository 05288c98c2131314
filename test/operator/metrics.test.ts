import { describe, expect, it } from 'vitest';
import { Registry, register as globalRegistry } from 'prom-client';
import { OperatorMetrics } from '../../operator/controller/metrics.ts';

describe('OperatorMetrics', () => {
  it('registers the controller-runtime style names on the given registry only', async () => {
    const registry = new Registry();
    const before = (await globalRegistry.getMetricsAsJSON()).length;
    const m = new OperatorMetrics(registry);
    m.observeReconcile('webhooktrigger', 'success', 0.01);
    m.queue('webhooktrigger').added();
    const names = (await registry.getMetricsAsJSON()).map((x) => x.name).sort();
    expect(names).toEqual(
      expect.arrayContaining([
        'hookgate_operator_reconcile_total',
        'hookgate_operator_reconcile_errors_total',
        'hookgate_operator_reconcile_time_seconds',
        'hookgate_operator_workqueue_depth',
        'hookgate_operator_workqueue_adds_total',
        'hookgate_operator_workqueue_retries_total',
      ]),
    );
    for (const n of names) {
      expect(n).toMatch(/^hookgate_operator_[a-z_]+$/);
    }
    // Counters end in _total, the duration is in seconds.
    const json = await registry.getMetricsAsJSON();
    for (const metric of json) {
      // prom-client types `type` as a numeric enum, but the runtime value is the string.
      if (String(metric.type) === 'counter') expect(metric.name).toMatch(/_total$/);
    }
    expect((await globalRegistry.getMetricsAsJSON()).length).toBe(before);
  });

  it('labels results and counts errors', async () => {
    const registry = new Registry();
    const m = new OperatorMetrics(registry);
    m.observeReconcile('workflow', 'error', 0.2);
    m.observeReconcile('workflow', 'error', 0.2, true);
    m.observeReconcile('workflow', 'requeue_after', 0.1);
    const text = await registry.metrics();
    expect(text).toContain(
      'hookgate_operator_reconcile_total{controller="workflow",result="error"} 2',
    );
    expect(text).toContain(
      'hookgate_operator_reconcile_total{controller="workflow",result="requeue_after"} 1',
    );
    expect(text).toContain('hookgate_operator_reconcile_errors_total{controller="workflow"} 2');
    expect(text).toContain(
      'hookgate_operator_terminal_reconcile_errors_total{controller="workflow"} 1',
    );
    expect(text).toContain(
      'hookgate_operator_reconcile_time_seconds_sum{controller="workflow"} 0.5',
    );
  });

  it('two instances on separate registries do not clash', () => {
    expect(() => {
      new OperatorMetrics(new Registry());
      new OperatorMetrics(new Registry());
    }).not.toThrow();
  });
});
