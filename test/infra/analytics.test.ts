// The component's `analytics` argument: checked with readable messages, turned into the
// chart's analytics.* values, and rendered by the real helm exactly as the same values
// given with --set (the gateways then read /api/analytics from Prometheus).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { analyticsValues, validateAnalytics } from '../../infra/analytics.ts';
import { chartValues, resolveArgs, validateArgs, type PlanArgs } from '../../infra/plan.ts';
import { chartDir, helm, parseObjects, tools, work, type K8sObject } from '../charts/chart.ts';

const valid: PlanArgs = {
  namespace: 'hooks',
  image: { tag: '0.1.0' },
  baseUrl: 'https://hooks.example.com',
};
const URL = 'https://prometheus.monitoring.svc:9090';

describe('analytics argument', () => {
  it('is optional: no analytics values without it (the chart default, memory)', () => {
    expect(chartValues(resolveArgs(valid))).not.toHaveProperty('analytics');
    expect(validateArgs(valid)).toEqual([]);
  });

  it('maps to the chart values, defaults filled in', () => {
    expect(
      analyticsValues({
        prometheus: {
          url: URL,
          tokenSecret: { name: 'prom-token' },
          caConfigMap: { name: 'prom-ca', key: 'bundle.pem' },
          rules: { enabled: true },
        },
      }),
    ).toEqual({
      backend: '',
      prometheus: {
        url: URL,
        selector: '',
        timeoutMs: 10000,
        existingSecret: 'prom-token',
        tokenKey: 'token',
        basicAuth: { existingSecret: '' },
        caConfigMap: 'prom-ca',
        caKey: 'bundle.pem',
        rules: { enabled: true, interval: '1m', labels: {} },
      },
    });
  });

  it('reports every problem with a readable message', () => {
    expect(
      validateArgs({
        ...valid,
        analytics: {
          backend: 'prometheus',
          prometheus: {
            timeoutMs: 5,
            tokenSecret: { name: 'Bad_Name' },
            basicAuthSecret: 'basic',
            caConfigMap: { name: 'ca', key: 'a b' },
            rules: { enabled: true, interval: 'soon' },
          },
        },
      }),
    ).toEqual([
      'analytics.backend prometheus needs analytics.prometheus.url',
      'analytics.prometheus.timeoutMs must be a whole number >= 100, got 5',
      'analytics.prometheus.tokenSecret and basicAuthSecret exclude each other',
      'analytics.prometheus.tokenSecret "Bad_Name" is not a valid object name',
      'analytics.prometheus.caConfigMap key "a b" is not a valid key',
      'analytics.prometheus.rules.interval "soon" is not a duration like 1m',
    ]);
    expect(validateAnalytics({ prometheus: { url: 'prometheus:9090' } })).toEqual([
      'analytics.prometheus.url "prometheus:9090" must be an http(s) URL',
    ]);
  });
});

describe.skipIf(!tools)('analytics argument, rendered by helm', () => {
  async function template(args: string[]): Promise<K8sObject[]> {
    const r = await helm(['template', 'hookgate', chartDir, '--namespace', 'hooks', ...args]);
    expect(r.code, r.stderr).toBe(0);
    return parseObjects(r.stdout);
  }
  const gatewayOnly = (objects: K8sObject[]) =>
    objects.filter((o) => o.kind === 'Deployment' || o.kind === 'PrometheusRule');

  it('renders what helm renders from the same values given with --set', async () => {
    const values = chartValues(
      resolveArgs({
        ...valid,
        analytics: {
          prometheus: {
            url: URL,
            selector: 'namespace="hooks"',
            timeoutMs: 3000,
            tokenSecret: { name: 'prom-token' },
            caConfigMap: { name: 'prom-ca' },
            rules: { enabled: true, labels: { release: 'prom' } },
          },
        },
      }),
    );
    const file = join(work, 'component-values-analytics.json');
    writeFileSync(file, JSON.stringify({ analytics: values.analytics }));
    const fromPulumi = await template(['-f', file]);
    const fromHelm = await template([
      ...['--set', `analytics.prometheus.url=${URL}`],
      ...['--set-string', 'analytics.prometheus.selector=namespace="hooks"'],
      ...['--set', 'analytics.prometheus.timeoutMs=3000'],
      ...['--set', 'analytics.prometheus.existingSecret=prom-token'],
      ...['--set', 'analytics.prometheus.caConfigMap=prom-ca'],
      ...['--set', 'analytics.prometheus.rules.enabled=true'],
      ...['--set', 'analytics.prometheus.rules.labels.release=prom'],
    ]);
    expect(gatewayOnly(fromPulumi)).toEqual(gatewayOnly(fromHelm));
    expect(fromPulumi.some((o) => o.kind === 'PrometheusRule')).toBe(true);
    expect(JSON.stringify(fromPulumi)).toContain('HOOKGATE_PROMETHEUS_TOKEN_FILE');
  });
});
