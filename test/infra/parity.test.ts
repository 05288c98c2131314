// `pulumi up` installs what `helm install` does: the values HookgateDeployment hands to
// k8s.helm.v4.Chart (captured under the strict mocks) are rendered with the real helm
// binary and compared with the chart rendered with its defaults. Same kinds, same names,
// the same objects (the chart's Redis, security contexts and container args included);
// only the generated Redis password differs between two renders.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { HookgateDeployment, type HookgateDeploymentArgs } from '../../infra/hookgate.ts';
import { chartAppVersion } from '../../infra/plan.ts';
import {
  chartDir,
  helm,
  names,
  parseObjects,
  tools,
  work,
  type K8sObject,
} from '../charts/chart.ts';
import { eventually } from '../support/eventually.ts';
import { T, installStrictMocks, valueOf, type Recorder } from './mocks.ts';

let rec: Recorder;
beforeAll(async () => {
  rec = await installStrictMocks();
});
beforeEach(() => rec.reset());
afterEach(() => {
  expect(rec.refused).toEqual([]);
});

const BASE_URL = 'https://hooks.example.com';

/** The chart inputs (release, namespace, values) the component registers. */
async function chartInputs(
  args: HookgateDeploymentArgs,
): Promise<{ release: string; namespace: string; values: unknown }> {
  const component = new HookgateDeployment('hookgate', args);
  await valueOf(component.urn);
  const chart = await eventually(() => {
    const found = rec.registrations.find((r) => r.type === T.chart);
    if (!found) throw new Error('no Chart registered yet');
    return found;
  });
  return {
    release: String(chart.inputs['name']),
    namespace: String(chart.inputs['namespace']),
    values: chart.inputs['values'],
  };
}

async function template(release: string, namespace: string, args: string[]): Promise<K8sObject[]> {
  const r = await helm(['template', release, chartDir, '--namespace', namespace, ...args]);
  expect(r.code, r.stderr).toBe(0);
  return parseObjects(r.stdout);
}

/** The generated Redis password is random per render; everything else must match. */
function withoutPassword(objects: K8sObject[]): K8sObject[] {
  return objects.map((o) =>
    o.kind === 'Secret' && o.metadata.name.endsWith('-redis') ? { ...o, data: '<generated>' } : o,
  );
}

describe.skipIf(!tools)('HookgateDeployment installs what helm install does', () => {
  it('renders, from the values it hands the Chart, the same objects as the chart defaults', async () => {
    const { release, namespace, values } = await chartInputs({
      namespace: 'hookgate',
      image: { tag: chartAppVersion() },
      baseUrl: BASE_URL,
    });
    const file = join(work, 'component-values.json');
    writeFileSync(file, JSON.stringify(values));
    const fromPulumi = await template(release, namespace, ['-f', file]);
    // `helm install hookgate charts/hookgate -n hookgate --set config.baseUrl=...`: the
    // base URL is the one value the component requires.
    const fromHelm = await template(release, namespace, ['--set', `config.baseUrl=${BASE_URL}`]);

    expect(names(fromPulumi)).toEqual(names(fromHelm));
    expect(names(fromPulumi)).toEqual([
      'ClusterRole/hookgate-operator',
      'ClusterRoleBinding/hookgate-gateway-auth-delegator',
      'ClusterRoleBinding/hookgate-operator',
      'ConfigMap/hookgate-redis',
      'CustomResourceDefinition/webhooktriggers.hookgate.dev',
      'CustomResourceDefinition/workflows.hookgate.dev',
      'Deployment/hookgate-gateway',
      'Deployment/hookgate-operator',
      'Deployment/hookgate-worker',
      'PodDisruptionBudget/hookgate-gateway',
      'PodDisruptionBudget/hookgate-operator',
      'PodDisruptionBudget/hookgate-worker',
      'Role/hookgate-operator-leader-election',
      'RoleBinding/hookgate-operator-leader-election',
      'Secret/hookgate-redis',
      'Service/hookgate-admin',
      'Service/hookgate-gateway',
      'Service/hookgate-metrics',
      'Service/hookgate-redis',
      'ServiceAccount/hookgate',
      'ServiceAccount/hookgate-gateway',
      'ServiceAccount/hookgate-redis',
      'ServiceAccount/hookgate-worker',
      'StatefulSet/hookgate-redis',
    ]);
    expect(withoutPassword(fromPulumi)).toEqual(withoutPassword(fromHelm));
  });

  it('keeps the parity with a Redis of your own and the opt-ins on', async () => {
    const { release, namespace, values } = await chartInputs({
      namespace: 'hooks',
      createNamespace: false,
      releaseName: 'edge',
      image: { repository: 'registry.example.com/hookgate', tag: '0.1.0' },
      baseUrl: BASE_URL,
      redis: { existingSecret: { name: 'redis-creds' } },
      networkPolicy: true,
      podDisruptionBudget: true,
      serviceMonitor: true,
      outbound: {
        allow: ['*.svc.cluster.local', '10.96.0.0/12'],
        deny: ['*.kube-system.svc.cluster.local'],
        namespaces: { payments: { allow: ['*.payments.svc.cluster.local'] } },
      },
      secretNamespaces: ['team-a', 'team-b'],
      redisClient: { commandTimeoutMs: 250, breakerOpenMs: 3000, writeWindowMs: 0 },
      logOutput: { bufferBytes: '16Mi', stallMs: 2000, syncFlushMs: 3000 },
      budgets: { executionStoreBytes: '256Mi', executionTtlMs: 3_600_000, listPageBytes: '2Mi' },
      tracing: {
        endpoint: 'http://otel-collector.observability:4318',
        exporters: ['otlp', 'console'],
        protocol: 'http/json',
        sampler: 'parentbased_traceidratio',
        samplerRatio: 0.25,
      },
    });
    const file = join(work, 'component-values-edge.json');
    writeFileSync(file, JSON.stringify(values));
    const fromPulumi = await template(release, namespace, ['-f', file]);
    const fromHelm = await template(release, namespace, [
      ...['--set', `config.baseUrl=${BASE_URL}`],
      ...['--set', 'image.repository=registry.example.com/hookgate'],
      ...['--set', 'redis.enabled=false', '--set', 'externalRedis.existingSecret.name=redis-creds'],
      ...['--set', 'networkPolicy.enabled=true', '--set', 'podDisruptionBudget.enabled=true'],
      ...['--set', 'metrics.serviceMonitor.enabled=true'],
      ...['--set', 'outbound.allow={*.svc.cluster.local,10.96.0.0/12}'],
      ...['--set', 'outbound.deny={*.kube-system.svc.cluster.local}'],
      ...['--set', 'outbound.namespaces.payments.allow={*.payments.svc.cluster.local}'],
      ...['--set', 'rbac.secretNamespaces={team-a,team-b}'],
      ...['--set', 'config.redisClient.commandTimeoutMs=250'],
      ...['--set', 'config.redisClient.breakerOpenMs=3000'],
      ...['--set', 'config.redisClient.writeWindowMs=0'],
      ...['--set', 'config.logOutput.bufferBytes=16Mi'],
      ...['--set', 'config.logOutput.stallMs=2000'],
      ...['--set', 'config.logOutput.syncFlushMs=3000'],
      ...['--set', 'config.budgets.executionStoreBytes=256Mi'],
      ...['--set', 'config.budgets.executionTtlMs=3600000'],
      ...['--set', 'config.budgets.listPageBytes=2Mi'],
      ...['--set', 'config.tracing.enabled=true'],
      ...['--set', 'config.tracing.endpoint=http://otel-collector.observability:4318'],
      ...['--set', 'config.tracing.exporters={otlp,console}'],
      ...['--set', 'config.tracing.protocol=http/json'],
      ...['--set', 'config.tracing.sampler=parentbased_traceidratio'],
      ...['--set', 'config.tracing.samplerRatio=0.25'],
    ]);
    expect(fromPulumi).toEqual(fromHelm);
    expect(JSON.stringify(fromPulumi)).toContain('"OTEL_TRACES_SAMPLER_ARG","value":"0.25"');
    expect(JSON.stringify(fromPulumi)).toContain('"OTEL_TRACES_EXPORTER","value":"otlp,console"');
    expect(JSON.stringify(fromPulumi)).toContain(
      '"OTEL_EXPORTER_OTLP_PROTOCOL","value":"http/json"',
    );
    expect(names(fromPulumi)).toContain('Role/edge-hookgate-operator-secrets');
    expect(names(fromPulumi).filter((n) => n.includes('redis'))).toEqual([]);
  });

  it('keeps the parity with the egress policies on (networkPolicyEgress)', async () => {
    const redisPeers = [{ ipBlock: { cidr: '10.1.2.3/32' } }];
    const promPeers = [
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } },
    ];
    const rule = {
      to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'billing' } } }],
      ports: [{ port: 8443, protocol: 'TCP' as const }],
    };
    const prometheusUrl = 'http://prometheus-operated.monitoring.svc:9090';
    const { release, namespace, values } = await chartInputs({
      namespace: 'hooks',
      image: { tag: chartAppVersion() },
      baseUrl: BASE_URL,
      redis: { existingSecret: { name: 'redis-creds' } },
      analytics: { prometheus: { url: prometheusUrl } },
      networkPolicy: true,
      networkPolicyEgress: {
        apiServer: { cidrs: ['172.18.0.2/32'], ports: [6443] },
        externalRedis: { to: redisPeers },
        prometheus: { to: promPeers },
        outboundRules: [rule],
      },
    });
    const file = join(work, 'component-values-egress.json');
    writeFileSync(file, JSON.stringify(values));
    const fromPulumi = await template(release, namespace, ['-f', file]);
    // What a helm user writes (chart README, "Egress"): only the keys that differ.
    const helmFile = join(work, 'helm-values-egress.json');
    writeFileSync(
      helmFile,
      JSON.stringify({
        config: { baseUrl: BASE_URL },
        redis: { enabled: false },
        externalRedis: { existingSecret: { name: 'redis-creds' } },
        analytics: { prometheus: { url: prometheusUrl } },
        networkPolicy: {
          enabled: true,
          egress: {
            enabled: true,
            apiServer: { cidrs: ['172.18.0.2/32'], ports: [6443] },
            externalRedis: { to: redisPeers },
            prometheus: { to: promPeers },
            outboundRules: [rule],
          },
        },
      }),
    );
    const fromHelm = await template(release, namespace, ['-f', helmFile]);
    expect(fromPulumi).toEqual(fromHelm);
    expect(names(fromPulumi).filter((n) => n.endsWith('-egress'))).toEqual([
      'NetworkPolicy/hookgate-gateway-egress',
      'NetworkPolicy/hookgate-operator-egress',
      'NetworkPolicy/hookgate-worker-egress',
    ]);
  });
});
