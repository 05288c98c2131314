// The chart's analytics values: the gateways read /api/analytics from Prometheus when
// analytics.prometheus.url is set (token Secret and CA ConfigMap mounted as files), bad
// combinations fail the render, and the opt-in PrometheusRule's recording rules pass
// `promtool check rules`.
import { execFile } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import {
  container,
  deployment,
  envOf,
  render,
  renderError,
  tools,
  work,
  type Deployment,
  type K8sObject,
} from './chart.ts';

const PROMTOOL = process.env.PROMTOOL_BIN ?? '/usr/bin/promtool';
const URL = 'http://prometheus-operated.monitoring.svc:9090';

interface Rule {
  record?: string;
  expr: string;
}
interface PrometheusRule extends K8sObject {
  spec: { groups: { name: string; interval: string; rules: Rule[] }[] };
}

const volumes = (d: Deployment) =>
  (d.spec.template.spec as unknown as { volumes: Record<string, unknown>[] }).volumes;

describe.skipIf(!tools)('chart: analytics', () => {
  it('defaults: memory, nothing about Prometheus, no PrometheusRule', async () => {
    const objects = await render();
    const env = envOf(container(deployment(objects, 'gateway')));
    expect(env.get('HOOKGATE_ANALYTICS')?.value).toBe('memory');
    expect([...env.keys()].filter((k) => k.startsWith('HOOKGATE_PROMETHEUS'))).toEqual([]);
    expect(objects.filter((o) => o.kind === 'PrometheusRule')).toEqual([]);
    // Only the gateways serve the analytics API.
    for (const role of ['operator', 'worker'])
      expect(envOf(container(deployment(objects, role))).has('HOOKGATE_ANALYTICS')).toBe(false);
  });

  it('a URL selects Prometheus; token Secret and CA ConfigMap are mounted read-only as files', async () => {
    const objects = await render(
      `analytics.prometheus.url=${URL}`,
      'analytics.prometheus.selector=namespace="hooks"',
      'analytics.prometheus.timeoutMs=2500',
      'analytics.prometheus.existingSecret=prom-token',
      'analytics.prometheus.caConfigMap=prom-ca',
    );
    const gateway = deployment(objects, 'gateway');
    const c = container(gateway);
    const env = envOf(c);
    expect(Object.fromEntries([...env].map(([k, v]) => [k, v.value ?? v.valueFrom]))).toMatchObject(
      {
        HOOKGATE_ANALYTICS: 'prometheus',
        HOOKGATE_PROMETHEUS_URL: URL,
        HOOKGATE_PROMETHEUS_SELECTOR: 'namespace="hooks"',
        HOOKGATE_PROMETHEUS_TIMEOUT_MS: '2500',
        HOOKGATE_PROMETHEUS_TOKEN_FILE: '/var/run/hookgate/prometheus-auth/token',
        HOOKGATE_PROMETHEUS_CA_FILE: '/var/run/hookgate/prometheus-ca/ca.crt',
      },
    );
    expect(c.volumeMounts).toEqual(
      expect.arrayContaining([
        { name: 'prometheus-auth', mountPath: '/var/run/hookgate/prometheus-auth', readOnly: true },
        { name: 'prometheus-ca', mountPath: '/var/run/hookgate/prometheus-ca', readOnly: true },
      ]),
    );
    expect(volumes(gateway)).toEqual(
      expect.arrayContaining([
        {
          name: 'prometheus-auth',
          secret: { secretName: 'prom-token', items: [{ key: 'token', path: 'token' }] },
        },
        {
          name: 'prometheus-ca',
          configMap: { name: 'prom-ca', items: [{ key: 'ca.crt', path: 'ca.crt' }] },
        },
      ]),
    );
  });

  it('basic auth from a Secret: the username as env, the password as a file', async () => {
    const objects = await render(
      `analytics.prometheus.url=${URL}`,
      'analytics.prometheus.basicAuth.existingSecret=prom-basic',
    );
    const env = envOf(container(deployment(objects, 'gateway')));
    expect(env.get('HOOKGATE_PROMETHEUS_USERNAME')?.valueFrom).toEqual({
      secretKeyRef: { name: 'prom-basic', key: 'username' },
    });
    expect(env.get('HOOKGATE_PROMETHEUS_PASSWORD_FILE')?.value).toBe(
      '/var/run/hookgate/prometheus-auth/password',
    );
  });

  it('backend=memory keeps the in-process store even with a URL', async () => {
    const objects = await render(`analytics.prometheus.url=${URL}`, 'analytics.backend=memory');
    const env = envOf(container(deployment(objects, 'gateway')));
    expect(env.get('HOOKGATE_ANALYTICS')?.value).toBe('memory');
    expect(env.has('HOOKGATE_PROMETHEUS_URL')).toBe(false);
  });

  it('refuses contradictions and bad values with a clear message', async () => {
    expect(await renderError('analytics.backend=prometheus')).toContain(
      'analytics.backend=prometheus needs analytics.prometheus.url',
    );
    expect(
      await renderError(
        `analytics.prometheus.url=${URL}`,
        'analytics.prometheus.existingSecret=a',
        'analytics.prometheus.basicAuth.existingSecret=b',
      ),
    ).toContain('exclude each other');
    expect(await renderError('analytics.backend=redis')).toMatch(/analytics\.backend|backend/);
    expect(await renderError('analytics.prometheus.url=prometheus:9090')).toMatch(/url/);
    expect(await renderError('analytics.prometheus.timeoutMs=5')).toMatch(/timeoutMs/);
    expect(await renderError('analytics.prometheus.token=x')).toMatch(/token/);
  });

  it('renders the PrometheusRule only when enabled; its rules pass promtool check rules', async () => {
    const objects = await render(
      'analytics.prometheus.rules.enabled=true',
      'analytics.prometheus.rules.labels.release=prom',
      'analytics.prometheus.selector=namespace="hooks"',
    );
    const rules = objects.filter((o): o is PrometheusRule => o.kind === 'PrometheusRule');
    expect(rules).toHaveLength(1);
    const rule = rules[0] as PrometheusRule;
    expect(rule.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(rule.metadata).toMatchObject({ name: 'hg-hookgate', namespace: 'hooks' });
    expect(rule.metadata.labels?.release).toBe('prom');
    // The recording rules (the queue and rate limiter alerts beside them:
    // test/charts/autoscaling.test.ts).
    const records = rule.spec.groups.flatMap((g) =>
      g.rules.flatMap((r) => (r.record ? [r.record] : [])),
    );
    expect(records).toEqual([
      'hookgate:http_server_requests:rate5m',
      'hookgate:http_server_request_duration_seconds_sum:rate5m',
      'hookgate:http_server_request_duration_seconds_bucket:rate5m',
      'hookgate:http_server_request_duration_seconds:p99_5m',
      'hookgate:http_server_errors:rate5m',
      'hookgate:http_server_requests:increase1h',
    ]);
    expect(rule.spec.groups[0]?.rules[0]?.expr).toContain(
      'http_server_request_duration_seconds_count{namespace="hooks"}[5m]',
    );
    // The namespace stays on every recorded series (the Grafana dashboard's variable).
    for (const r of rule.spec.groups[0]?.rules ?? [])
      if (r.expr.startsWith('sum by')) expect(r.expr).toMatch(/^sum by \(namespace, /);
    if (!existsSync(PROMTOOL)) {
      if (process.env.CI === 'true') throw new Error(`${PROMTOOL} is missing`);
      console.warn(`skipped promtool check: ${PROMTOOL} is missing`);
      return;
    }
    const file = join(work, 'rules.yaml');
    writeFileSync(file, stringify({ groups: rule.spec.groups }));
    const out = await new Promise<{ code: number; text: string }>((resolve) => {
      execFile(PROMTOOL, ['check', 'rules', file], (err, stdout, stderr) =>
        resolve({ code: err ? 1 : 0, text: stdout + stderr }),
      );
    });
    expect(out.text).toContain('SUCCESS: 10 rules found');
    expect(out.code).toBe(0);
  });
});
