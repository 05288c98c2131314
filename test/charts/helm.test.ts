// The Helm chart (charts/hookgate) through a real helm v4 binary: lint, render with
// `helm template` and read the objects back. The binary comes from kube-tools (see
// test/support/kube-tools.ts); without it the suite skips loudly, and under CI=true it
// fails instead.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, parseAllDocuments } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { chartValues, resolveArgs, resourceNames } from '../../infra/plan.ts';
import { kubeToolEnv, kubeToolsOrSkip } from '../support/kube-tools.ts';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const chartDir = join(repoRoot, 'charts', 'hookgate');
const RELEASE = 'hg';
const NAMESPACE = 'hooks';

interface Metadata {
  name: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: Metadata;
  [key: string]: unknown;
}
interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    secretKeyRef?: { name: string; key: string };
    fieldRef?: { fieldPath: string };
  };
}
interface Probe {
  httpGet: { path: string; port: string };
}
interface Container {
  name: string;
  image: string;
  command: string[];
  ports: { name: string; containerPort: number }[];
  env: EnvVar[];
  readinessProbe: Probe;
  livenessProbe: Probe;
  lifecycle?: { preStop?: { sleep?: { seconds: number } } };
  resources: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext: {
    runAsNonRoot: boolean;
    allowPrivilegeEscalation: boolean;
    readOnlyRootFilesystem: boolean;
    capabilities: { drop: string[] };
    seccompProfile: { type: string };
  };
  volumeMounts: { name: string; mountPath: string }[];
}
interface Deployment extends K8sObject {
  spec: {
    replicas: number;
    selector: { matchLabels: Record<string, string> };
    template: {
      metadata: { labels: Record<string, string> };
      spec: {
        serviceAccountName: string;
        automountServiceAccountToken: boolean;
        terminationGracePeriodSeconds: number;
        topologySpreadConstraints: unknown[];
        securityContext: {
          runAsNonRoot: boolean;
          runAsUser: number;
          seccompProfile: { type: string };
        };
        containers: Container[];
        volumes: { name: string; emptyDir?: object }[];
      };
    };
  };
}
interface Service extends K8sObject {
  spec: {
    type?: string;
    clusterIP?: string;
    selector: Record<string, string>;
    ports: { name: string; port: number; targetPort: string }[];
  };
}
interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

interface ServiceMonitor extends K8sObject {
  spec: { selector: { matchLabels: Record<string, string> }; endpoints: { port: string }[] };
}
interface NetworkPolicy extends K8sObject {
  spec: { ingress: { ports: { port: string }[]; from?: unknown[] }[]; policyTypes: string[] };
}
interface PodDisruptionBudget extends K8sObject {
  spec: { maxUnavailable: number; selector: { matchLabels: Record<string, string> } };
}
interface Ingress extends K8sObject {
  spec: { ingressClassName: string; tls: unknown[]; rules: unknown[] };
}
interface ClusterRole extends K8sObject {
  rules: PolicyRule[];
}
interface ClusterRoleBinding extends K8sObject {
  roleRef: unknown;
  subjects: unknown[];
}

const tools = await kubeToolsOrSkip();
const work = mkdtempSync(join(tmpdir(), 'hookgate-helm-'));
// HELM_CACHE_HOME, HELM_CONFIG_HOME, HELM_DATA_HOME (and HOME) under the temp dir; no cluster.
const env = kubeToolEnv(work, join(work, 'no-kubeconfig'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

function helm(args: string[]): Promise<HelmResult> {
  return new Promise((done) => {
    execFile(
      tools?.helm ?? 'helm-missing',
      args,
      { env, timeout: 20_000, maxBuffer: 32 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        done({ code, stdout, stderr });
      },
    );
  });
}

function setArgs(sets: string[]): string[] {
  return sets.flatMap((s) => ['--set', s]);
}

const rendered = new Map<string, Promise<K8sObject[]>>();

/**
 * `helm template` with the given --set values; every rendered object, parsed. Memoised
 * per argument list (each helm run costs ~0.3 s here); callers must not mutate the result.
 */
function render(...sets: string[]): Promise<K8sObject[]> {
  const key = JSON.stringify(sets);
  let pending = rendered.get(key);
  if (!pending) {
    pending = renderNow(sets);
    rendered.set(key, pending);
  }
  return pending;
}

async function renderNow(sets: string[]): Promise<K8sObject[]> {
  const r = await helm(['template', RELEASE, chartDir, '--namespace', NAMESPACE, ...setArgs(sets)]);
  if (r.code !== 0) throw new Error(`helm template failed (${r.code}): ${r.stderr}`);
  const objects: K8sObject[] = [];
  for (const doc of parseAllDocuments(r.stdout)) {
    if (doc.errors.length > 0) throw new Error(`invalid YAML from helm: ${doc.errors[0]?.message}`);
    const value = doc.toJS() as K8sObject | null;
    if (value) objects.push(value);
  }
  return objects;
}

/** `helm template` that must fail: its stderr. */
async function renderError(...sets: string[]): Promise<string> {
  const r = await helm(['template', RELEASE, chartDir, '--namespace', NAMESPACE, ...setArgs(sets)]);
  expect(r.code, `helm template unexpectedly succeeded with ${sets.join(' ')}`).not.toBe(0);
  return r.stderr;
}

function kinds(objects: K8sObject[]): string[] {
  return objects.map((o) => o.kind).sort();
}

function find<T extends K8sObject>(objects: K8sObject[], kind: string, name: string): T {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) {
    const have = objects.map((o) => `${o.kind}/${o.metadata.name}`).join(', ');
    throw new Error(`no ${kind}/${name} rendered; have: ${have}`);
  }
  return found as T;
}

function deployment(objects: K8sObject[], role: string): Deployment {
  return find<Deployment>(objects, 'Deployment', `${RELEASE}-hookgate-${role}`);
}

function container(d: Deployment): Container {
  const [c] = d.spec.template.spec.containers;
  if (!c) throw new Error(`${d.metadata.name} has no container`);
  return c;
}

function envOf(c: Container): Map<string, EnvVar> {
  return new Map(c.env.map((e) => [e.name, e]));
}

const DEFAULT_KINDS = [
  'ClusterRole',
  'ClusterRoleBinding',
  'CustomResourceDefinition',
  'CustomResourceDefinition',
  'Deployment',
  'Deployment',
  'Deployment',
  'Service',
  'Service',
  'ServiceAccount',
];
const OPT_IN_KINDS = ['Ingress', 'NetworkPolicy', 'PodDisruptionBudget', 'ServiceMonitor'];
const ALL_OPT_INS = [
  'metrics.serviceMonitor.enabled=true',
  'networkPolicy.enabled=true',
  'podDisruptionBudget.enabled=true',
  'ingress.enabled=true',
  'ingress.host=hooks.example.com',
  'ingress.tls.enabled=true',
];

describe.skipIf(!tools)('helm chart charts/hookgate', () => {
  it('passes helm lint --strict, with defaults and with every opt-in enabled', async () => {
    const plain = await helm(['lint', '--strict', chartDir]);
    expect(plain.stdout + plain.stderr).toContain('0 chart(s) failed');
    expect(plain.code).toBe(0);
    const all = await helm([
      'lint',
      '--strict',
      chartDir,
      ...setArgs([...ALL_OPT_INS, 'redis.existingSecret.name=redis']),
    ]);
    expect(all.code, all.stdout + all.stderr).toBe(0);
  });

  it('renders the expected objects with defaults, each with the recommended labels', async () => {
    const objects = await render();
    expect(kinds(objects)).toEqual(DEFAULT_KINDS);
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      'ClusterRole/hg-hookgate-operator',
      'ClusterRoleBinding/hg-hookgate-operator',
      'CustomResourceDefinition/webhooktriggers.hookgate.dev',
      'CustomResourceDefinition/workflows.hookgate.dev',
      'Deployment/hg-hookgate-gateway',
      'Deployment/hg-hookgate-operator',
      'Deployment/hg-hookgate-worker',
      'Service/hg-hookgate-gateway',
      'Service/hg-hookgate-metrics',
      'ServiceAccount/hg-hookgate',
    ]);
    expectRecommendedLabels(objects);
  });

  it('puts the recommended labels on the opt-in objects too', async () => {
    const objects = await render(...ALL_OPT_INS);
    expect(kinds(objects.filter((o) => OPT_IN_KINDS.includes(o.kind)))).toEqual([
      'Ingress',
      'NetworkPolicy',
      'PodDisruptionBudget',
      'PodDisruptionBudget',
      'PodDisruptionBudget',
      'ServiceMonitor',
    ]);
    expectRecommendedLabels(objects);
  });

  it('gives each Deployment selector labels that its pods carry, and the labels of its role', async () => {
    const objects = await render();
    for (const role of ['operator', 'gateway', 'worker']) {
      const d = deployment(objects, role);
      expect(d.spec.selector.matchLabels).toEqual({
        'app.kubernetes.io/name': 'hookgate',
        'app.kubernetes.io/instance': RELEASE,
        'app.kubernetes.io/component': role,
      });
      expect(d.spec.template.metadata.labels).toMatchObject(d.spec.selector.matchLabels);
      expect(d.metadata.labels?.['app.kubernetes.io/component']).toBe(role);
      // Replicas spread over nodes when possible, never blocking scheduling.
      expect(d.spec.template.spec.topologySpreadConstraints).toEqual([
        {
          maxSkew: 1,
          topologyKey: 'kubernetes.io/hostname',
          whenUnsatisfiable: 'ScheduleAnyway',
          labelSelector: { matchLabels: d.spec.selector.matchLabels },
        },
      ]);
    }
  });

  it('ships the generated CRDs with helm.sh/resource-policy: keep, and drops them with crds.enabled=false', async () => {
    const objects = await render();
    const crds = objects.filter((o) => o.kind === 'CustomResourceDefinition');
    expect(crds.map((c) => c.metadata.name).sort()).toEqual([
      'webhooktriggers.hookgate.dev',
      'workflows.hookgate.dev',
    ]);
    for (const crd of crds) {
      expect(crd.metadata.annotations?.['helm.sh/resource-policy']).toBe('keep');
      // The same spec as the checked-in crds/ file: one source for both.
      const file = parse(
        readFileSync(join(repoRoot, 'crds', `${crd.metadata.name}.yaml`), 'utf8'),
      ) as K8sObject;
      expect(crd['spec']).toEqual(file['spec']);
    }

    const without = await render('crds.enabled=false');
    expect(without.filter((o) => o.kind === 'CustomResourceDefinition')).toEqual([]);
    expect(kinds(without)).toEqual(DEFAULT_KINDS.filter((k) => k !== 'CustomResourceDefinition'));
  });

  it('rejects unknown and mistyped values through values.schema.json', async () => {
    expect(await renderError('replicaCount=2')).toMatch(
      /schema[\s\S]*additional properties 'replicaCount' not allowed/,
    );
    expect(await renderError('gateway.replcas=2')).toMatch(
      /at '\/gateway': additional properties 'replcas' not allowed/,
    );
    expect(await renderError('operator.leaderElection.enabeld=false')).toMatch(
      /at '\/operator\/leaderElection': additional properties 'enabeld' not allowed/,
    );
    expect(await renderError('worker.replicas=two')).toMatch(/\/worker\/replicas/);
    expect(await renderError('gateway.executions=sync')).toMatch(
      /at '\/gateway\/executions': value must be one of 'queue', 'inline'/,
    );
    expect(await renderError('worker.concurrency=0')).toMatch(
      /at '\/worker\/concurrency': minimum: got 0, want 1/,
    );
    expect(await renderError('worker.concurrency=-4')).toMatch(/\/worker\/concurrency/);
    expect(await renderError('worker.concurrency=many')).toMatch(/\/worker\/concurrency/);
    expect(await renderError('gateway.maxQueued=0')).toMatch(/\/gateway\/maxQueued/);
    // Renewals run at most every 100 ms: shorter claim times would steal running jobs.
    expect(await renderError('worker.claimIdleMs=500')).toMatch(/\/worker\/claimIdleMs/);
    expect(await renderError('config.logLevel=verbose')).toMatch(/\/config\/logLevel/);
    expect(await renderError('redis.url=http://redis:6379')).toMatch(/\/redis\/url/);
    // Neither a URL nor a Secret: the roles would have no Redis.
    expect(await renderError('redis.url=')).toContain(
      'redis.url or redis.existingSecret.name is required',
    );
  });

  it('closes every fixed-shape object in values.schema.json (additionalProperties: false)', () => {
    const schema = JSON.parse(
      readFileSync(join(chartDir, 'values.schema.json'), 'utf8'),
    ) as unknown;
    const open: string[] = [];
    const walk = (node: unknown, path: string): void => {
      if (Array.isArray(node)) {
        node.forEach((n, i) => walk(n, `${path}/${i}`));
        return;
      }
      if (typeof node !== 'object' || node === null) return;
      const s = node as Record<string, unknown>;
      if (s['type'] === 'object') {
        const ap = s['additionalProperties'];
        // Fixed shape: closed. Free-form maps (labels, annotations, nodeSelector): strings only.
        const closed = 'properties' in s ? ap === false : isStringMap(ap);
        if (!closed) open.push(path || '/');
      }
      for (const [k, v] of Object.entries(s)) walk(v, `${path}/${k}`);
    };
    walk(schema, '');
    expect(open).toEqual([]);
  });

  it('renders the opt-in objects only when enabled, each on its own flag', async () => {
    const defaults = await render();
    expect(defaults.filter((o) => OPT_IN_KINDS.includes(o.kind))).toEqual([]);

    const cases: [string[], string[]][] = [
      [['metrics.serviceMonitor.enabled=true'], ['ServiceMonitor']],
      [['networkPolicy.enabled=true'], ['NetworkPolicy']],
      [
        ['podDisruptionBudget.enabled=true'],
        ['PodDisruptionBudget', 'PodDisruptionBudget', 'PodDisruptionBudget'],
      ],
      [['ingress.enabled=true', 'ingress.host=hooks.example.com'], ['Ingress']],
    ];
    for (const [sets, expected] of cases) {
      const objects = await render(...sets);
      expect(kinds(objects.filter((o) => OPT_IN_KINDS.includes(o.kind))), sets.join(' ')).toEqual(
        expected,
      );
      expect(objects.length, sets.join(' ')).toBe(DEFAULT_KINDS.length + expected.length);
    }
  });

  it('wires the opt-in objects to the right pods and ports', async () => {
    const objects = await render(
      'metrics.serviceMonitor.enabled=true',
      'metrics.serviceMonitor.labels.release=prom',
      'networkPolicy.enabled=true',
      'networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.name=monitoring',
      'podDisruptionBudget.enabled=true',
      'ingress.enabled=true',
      'ingress.host=hooks.example.com',
      'ingress.className=nginx',
      'ingress.tls.enabled=true',
    );
    const metricsService = find<Service>(objects, 'Service', 'hg-hookgate-metrics');
    const sm = find<ServiceMonitor>(objects, 'ServiceMonitor', 'hg-hookgate');
    expect(sm.metadata.labels?.['release']).toBe('prom');
    expect(metricsService.metadata.labels).toMatchObject(sm.spec.selector.matchLabels);
    expect(sm.spec.endpoints.map((e) => e.port)).toEqual(['metrics']);
    expect(metricsService.spec.clusterIP).toBe('None');
    // Not the gateway Service: each pod is scraped once, through the headless Service.
    const gatewayService = find<Service>(objects, 'Service', 'hg-hookgate-gateway');
    expect(gatewayService.metadata.labels).not.toMatchObject(sm.spec.selector.matchLabels);

    const np = find<NetworkPolicy>(objects, 'NetworkPolicy', 'hg-hookgate');
    expect(np.spec.policyTypes).toEqual(['Ingress']);
    expect(np.spec.ingress).toEqual([
      { ports: [{ port: 'http', protocol: 'TCP' }] },
      {
        ports: [{ port: 'metrics', protocol: 'TCP' }],
        from: [{ namespaceSelector: { matchLabels: { name: 'monitoring' } } }],
      },
    ]);

    for (const role of ['operator', 'gateway', 'worker']) {
      const pdb = find<PodDisruptionBudget>(objects, 'PodDisruptionBudget', `hg-hookgate-${role}`);
      expect(pdb.spec.maxUnavailable).toBe(1);
      expect(pdb.spec.selector.matchLabels).toEqual(
        deployment(objects, role).spec.selector.matchLabels,
      );
    }

    const ingress = find<Ingress>(objects, 'Ingress', 'hg-hookgate-gateway');
    expect(ingress.spec.ingressClassName).toBe('nginx');
    expect(ingress.spec.tls).toEqual([
      { hosts: ['hooks.example.com'], secretName: 'hg-hookgate-tls' },
    ]);
    expect(ingress.spec.rules).toEqual([
      {
        host: 'hooks.example.com',
        http: {
          paths: [
            {
              // Only the webhook endpoints: admin, executions, analytics stay internal.
              path: '/webhook/',
              pathType: 'Prefix',
              backend: { service: { name: 'hg-hookgate-gateway', port: { name: 'http' } } },
            },
          ],
        },
      },
    ]);
    // With the Ingress on and no explicit base URL, status.url points at the Ingress.
    for (const role of ['operator', 'gateway', 'worker']) {
      expect(envOf(container(deployment(objects, role))).get('HOOKGATE_BASE_URL')?.value).toBe(
        'https://hooks.example.com',
      );
    }

    expect(await renderError('ingress.enabled=true')).toContain(
      'ingress.host is required when ingress.enabled is true',
    );
    // Without TLS the derived base URL is plain http.
    const plain = await render('ingress.enabled=true', 'ingress.host=hooks.example.com');
    expect(envOf(container(deployment(plain, 'gateway'))).get('HOOKGATE_BASE_URL')?.value).toBe(
      'http://hooks.example.com',
    );
  });

  it('grants the operator exactly the RBAC it needs, bound to the chart ServiceAccount', async () => {
    const objects = await render();
    const role = find<ClusterRole>(objects, 'ClusterRole', 'hg-hookgate-operator');
    expect(role.rules).toEqual([
      {
        apiGroups: ['hookgate.dev'],
        resources: ['workflows', 'webhooktriggers'],
        verbs: ['get', 'list', 'watch', 'update', 'patch'],
      },
      {
        apiGroups: ['hookgate.dev'],
        resources: ['workflows/status', 'webhooktriggers/status'],
        verbs: ['update', 'patch'],
      },
      {
        apiGroups: ['hookgate.dev'],
        resources: ['workflows/finalizers', 'webhooktriggers/finalizers'],
        verbs: ['update', 'patch'],
      },
      { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
      { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        verbs: ['get', 'create', 'update'],
      },
    ]);
    // Nothing cluster-wide beyond that: no wildcards, no delete, no secret writes.
    for (const rule of role.rules) {
      expect([...rule.apiGroups, ...rule.resources, ...rule.verbs]).not.toContain('*');
      expect(rule.verbs).not.toContain('delete');
    }

    const binding = find<ClusterRoleBinding>(objects, 'ClusterRoleBinding', 'hg-hookgate-operator');
    expect(binding.roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: 'hg-hookgate-operator',
    });
    expect(binding.subjects).toEqual([
      { kind: 'ServiceAccount', name: 'hg-hookgate', namespace: NAMESPACE },
    ]);
    const sa = find(objects, 'ServiceAccount', 'hg-hookgate');
    expect(sa['automountServiceAccountToken']).toBe(false);

    // Only the operator mounts the token; gateway and workers never call the API.
    expect(deployment(objects, 'operator').spec.template.spec.automountServiceAccountToken).toBe(
      true,
    );
    expect(deployment(objects, 'gateway').spec.template.spec.automountServiceAccountToken).toBe(
      false,
    );
    expect(deployment(objects, 'worker').spec.template.spec.automountServiceAccountToken).toBe(
      false,
    );

    const noRbac = await render('rbac.create=false', 'serviceAccount.create=false');
    expect(kinds(noRbac)).not.toContain('ClusterRole');
    expect(kinds(noRbac)).not.toContain('ClusterRoleBinding');
    expect(kinds(noRbac)).not.toContain('ServiceAccount');
    expect(deployment(noRbac, 'operator').spec.template.spec.serviceAccountName).toBe('default');
  });

  it('runs the operator as 2 leader-elected replicas of `hookgate operator`', async () => {
    const objects = await render();
    const d = deployment(objects, 'operator');
    expect(d.spec.replicas).toBe(2);
    const c = container(d);
    expect(c.image).toBe('ghcr.io/hookgate/hookgate:0.1.0');
    expect(c.command).toEqual(['node', 'roles/cli.ts', 'operator']);
    const e = envOf(c);
    expect(e.get('HOOKGATE_LEADER_ELECTION')?.value).toBe('true');
    expect(e.get('HOOKGATE_LEASE_NAME')?.value).toBe('hg-hookgate-operator');
    expect(e.get('HOOKGATE_LEASE_NAMESPACE')?.valueFrom?.fieldRef?.fieldPath).toBe(
      'metadata.namespace',
    );
    expect(e.get('POD_NAME')?.valueFrom?.fieldRef?.fieldPath).toBe('metadata.name');
    expect(d.spec.template.spec.terminationGracePeriodSeconds).toBe(30);
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'metrics' });
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'metrics' });

    // Two replicas without a Lease would reconcile twice: refused.
    expect(await renderError('operator.leaderElection.enabled=false')).toContain(
      'operator.replicas > 1 needs operator.leaderElection.enabled',
    );
    const single = await render('operator.leaderElection.enabled=false', 'operator.replicas=1');
    expect(
      envOf(container(deployment(single, 'operator'))).get('HOOKGATE_LEADER_ELECTION')?.value,
    ).toBe('false');
  });

  it('runs 2 replicas of `hookgate worker` with Redis, its settings and probes on the metrics port', async () => {
    const objects = await render();
    const d = deployment(objects, 'worker');
    expect(d.spec.replicas).toBe(2);
    expect(d.spec.template.spec.terminationGracePeriodSeconds).toBe(30);
    const c = container(d);
    expect(c.command).toEqual(['node', 'roles/cli.ts', 'worker']);
    // No traffic port: metrics and health only.
    expect(c.ports).toEqual([{ name: 'metrics', containerPort: 9090, protocol: 'TCP' }]);
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'metrics' });
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'metrics' });
    expect(c.lifecycle).toBeUndefined();
    const e = envOf(c);
    expect(e.get('REDIS_URL')?.value).toBe('redis://redis:6379');
    expect(e.get('METRICS_PORT')?.value).toBe('9090');
    expect(e.get('HOOKGATE_WORKER_CONCURRENCY')?.value).toBe('32');
    expect(e.get('HOOKGATE_WORKER_CLAIM_IDLE_MS')?.value).toBe('60000');
    // Gateway-only settings stay on the gateway.
    for (const name of ['PORT', 'HOOKGATE_EXECUTIONS', 'HOOKGATE_MAX_QUEUED']) {
      expect(e.has(name), name).toBe(false);
    }

    const custom = await render(
      'worker.replicas=5',
      'worker.concurrency=8',
      'worker.claimIdleMs=120000',
      'worker.terminationGracePeriodSeconds=45',
      'redis.existingSecret.name=hookgate-redis',
      'metrics.port=9464',
    );
    const cd = deployment(custom, 'worker');
    expect(cd.spec.replicas).toBe(5);
    expect(cd.spec.template.spec.terminationGracePeriodSeconds).toBe(45);
    const ce = envOf(container(cd));
    expect(ce.get('HOOKGATE_WORKER_CONCURRENCY')?.value).toBe('8');
    expect(ce.get('HOOKGATE_WORKER_CLAIM_IDLE_MS')?.value).toBe('120000');
    expect(ce.get('METRICS_PORT')?.value).toBe('9464');
    expect(ce.get('REDIS_URL')?.valueFrom?.secretKeyRef).toEqual({
      name: 'hookgate-redis',
      key: 'redis-url',
    });
    expect(container(cd).readinessProbe.httpGet.port).toBe('metrics');
    expect(container(cd).ports).toEqual([
      { name: 'metrics', containerPort: 9464, protocol: 'TCP' },
    ]);
  });

  it('queues executions for the workers by default, with the queue bound', async () => {
    const e = envOf(container(deployment(await render(), 'gateway')));
    expect(e.get('HOOKGATE_EXECUTIONS')?.value).toBe('queue');
    expect(e.get('HOOKGATE_MAX_QUEUED')?.value).toBe('100000');
    // Large numbers stay integers, not 1e+06.
    const big = envOf(container(deployment(await render('gateway.maxQueued=1000000'), 'gateway')));
    expect(big.get('HOOKGATE_MAX_QUEUED')?.value).toBe('1000000');
  });

  it('renders no workers, nor their PodDisruptionBudget, when the gateways run executions inline', async () => {
    const objects = await render(
      'gateway.executions=inline',
      'podDisruptionBudget.enabled=true',
      'worker.replicas=3',
    );
    const names = objects.map((o) => `${o.kind}/${o.metadata.name}`);
    expect(names).not.toContain('Deployment/hg-hookgate-worker');
    expect(names).not.toContain('PodDisruptionBudget/hg-hookgate-worker');
    expect(names.filter((n) => n.startsWith('Deployment/')).sort()).toEqual([
      'Deployment/hg-hookgate-gateway',
      'Deployment/hg-hookgate-operator',
    ]);
    expect(names.filter((n) => n.startsWith('PodDisruptionBudget/')).sort()).toEqual([
      'PodDisruptionBudget/hg-hookgate-gateway',
      'PodDisruptionBudget/hg-hookgate-operator',
    ]);
    const e = envOf(container(deployment(objects, 'gateway')));
    expect(e.get('HOOKGATE_EXECUTIONS')?.value).toBe('inline');
    // The queue bound means nothing without a queue.
    expect(e.has('HOOKGATE_MAX_QUEUED')).toBe(false);
    expectRecommendedLabels(objects);
  });

  it('says in the install notes when nothing runs the queued executions', async () => {
    const notes = async (...sets: string[]): Promise<string> => {
      const r = await helm([
        'install',
        RELEASE,
        chartDir,
        '--namespace',
        NAMESPACE,
        '--dry-run=client',
        ...setArgs(sets),
      ]);
      expect(r.code, r.stderr).toBe(0);
      return r.stdout.slice(r.stdout.indexOf('NOTES:'));
    };
    expect(await notes()).not.toMatch(/worker\.replicas is 0|inline/);
    expect(await notes('worker.replicas=0')).toContain(
      'worker.replicas is 0: executions queue in Redis and nothing runs them',
    );
    expect(await notes('gateway.executions=inline')).toContain(
      'gateway.executions is inline: each gateway runs the executions',
    );
  });

  it('runs every pod as non-root with a read-only root filesystem and no capabilities', async () => {
    const objects = await render();
    for (const role of ['operator', 'gateway', 'worker']) {
      const pod = deployment(objects, role).spec.template.spec;
      expect(pod.securityContext).toMatchObject({
        runAsNonRoot: true,
        runAsUser: 1000,
        seccompProfile: { type: 'RuntimeDefault' },
      });
      const c = container(deployment(objects, role));
      expect(c.securityContext, role).toEqual({
        runAsNonRoot: true,
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
        seccompProfile: { type: 'RuntimeDefault' },
      });
      // A writable /tmp, since the root filesystem is not.
      expect(c.volumeMounts).toEqual([{ name: 'tmp', mountPath: '/tmp' }]);
      expect(pod.volumes).toEqual([{ name: 'tmp', emptyDir: {} }]);
      expect(c.resources.requests).toHaveProperty('memory');
      expect(c.resources.limits).toHaveProperty('memory');
      expect(c.command).toEqual(['node', 'roles/cli.ts', role]);
    }
  });

  it('serves the gateway on Service port 80 → 8080 with probes and a graceful stop', async () => {
    const objects = await render();
    const svc = find<Service>(objects, 'Service', 'hg-hookgate-gateway');
    expect(svc.spec.type).toBe('ClusterIP');
    expect(svc.spec.ports).toEqual([
      { name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' },
    ]);
    const d = deployment(objects, 'gateway');
    expect(svc.spec.selector).toEqual(d.spec.selector.matchLabels);
    const c = container(d);
    expect(c.ports).toEqual([
      { name: 'http', containerPort: 8080, protocol: 'TCP' },
      { name: 'metrics', containerPort: 9090, protocol: 'TCP' },
    ]);
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(d.spec.template.spec.terminationGracePeriodSeconds).toBe(30);
    expect(c.lifecycle?.preStop?.sleep?.seconds).toBe(5);
    // The native sleep action needs Kubernetes 1.30; Chart.yaml says so.
    const old = await helm(['template', RELEASE, chartDir, '--kube-version', '1.29.0']);
    expect(old.stderr).toContain('chart requires kubeVersion: >=1.30.0-0');

    const metrics = find<Service>(objects, 'Service', 'hg-hookgate-metrics');
    expect(metrics.spec.ports).toEqual([
      { name: 'metrics', port: 9090, targetPort: 'metrics', protocol: 'TCP' },
    ]);
    // Every role's pods, and only this release's.
    expect(metrics.spec.selector).toEqual({
      'app.kubernetes.io/name': 'hookgate',
      'app.kubernetes.io/instance': RELEASE,
    });
    for (const role of ['operator', 'gateway', 'worker']) {
      const pod = deployment(objects, role).spec.template;
      expect(pod.metadata.labels, role).toMatchObject(metrics.spec.selector);
      expect(container(deployment(objects, role)).ports.map((p) => p.name)).toContain('metrics');
    }
  });

  it('passes base URL, trusted proxies, log level and Redis to the roles', async () => {
    const defaults = await render();
    for (const role of ['operator', 'gateway', 'worker']) {
      const e = envOf(container(deployment(defaults, role)));
      expect(e.get('HOOKGATE_BASE_URL')?.value).toBe(`http://hg-hookgate-gateway.${NAMESPACE}.svc`);
      expect(e.get('REDIS_URL')?.value).toBe('redis://redis:6379');
      expect(e.get('METRICS_PORT')?.value).toBe('9090');
      expect(e.get('LOG_LEVEL')?.value).toBe('info');
      expect(e.get('HOST')?.value).toBe('0.0.0.0');
    }
    const gw = envOf(container(deployment(defaults, 'gateway')));
    expect(gw.get('PORT')?.value).toBe('8080');
    expect(gw.get('HOOKGATE_TRUSTED_PROXIES')?.value).toBe('');
    // Only the gateway reads X-Forwarded-*.
    expect(envOf(container(deployment(defaults, 'worker'))).has('HOOKGATE_TRUSTED_PROXIES')).toBe(
      false,
    );

    const custom = await render(
      'config.baseUrl=https://hooks.example.com/',
      'config.trustedProxies={10.0.0.0/8,192.168.0.0/16}',
      'config.logLevel=debug',
      'redis.existingSecret.name=hookgate-redis',
      'image.tag=1.2.3',
      'metrics.port=9464',
    );
    for (const role of ['operator', 'gateway', 'worker']) {
      const c = container(deployment(custom, role));
      expect(c.image).toBe('ghcr.io/hookgate/hookgate:1.2.3');
      const e = envOf(c);
      expect(e.get('HOOKGATE_BASE_URL')?.value).toBe('https://hooks.example.com');
      expect(e.get('LOG_LEVEL')?.value).toBe('debug');
      expect(e.get('METRICS_PORT')?.value).toBe('9464');
      expect(e.get('REDIS_URL')).toEqual({
        name: 'REDIS_URL',
        valueFrom: { secretKeyRef: { name: 'hookgate-redis', key: 'redis-url' } },
      });
      expect(c.ports.find((p) => p.name === 'metrics')?.containerPort).toBe(9464);
    }
    expect(
      envOf(container(deployment(custom, 'gateway'))).get('HOOKGATE_TRUSTED_PROXIES')?.value,
    ).toBe('10.0.0.0/8,192.168.0.0/16');
  });

  it('accepts the values the Pulumi program computes, and names objects as it predicts', async () => {
    const args = resolveArgs({
      namespace: 'hooks',
      releaseName: 'edge',
      image: { tag: '2.0.0' },
      baseUrl: 'https://hooks.example.com',
      redis: { url: 'redis://redis:6379' },
      replicas: { operator: 1, gateway: 3 },
      workerConcurrency: 16,
    });
    const file = join(work, 'pulumi-values.json');
    writeFileSync(file, JSON.stringify(chartValues(args)));
    const r = await helm(['template', 'edge', chartDir, '--namespace', 'hooks', '-f', file]);
    expect(r.code, r.stderr).toBe(0);
    const objects = parseAllDocuments(r.stdout)
      .map((d) => d.toJS() as K8sObject | null)
      .filter((o): o is K8sObject => o !== null);
    const names = resourceNames('edge');
    // The chart installs the CRDs for Pulumi too; the provider turns their keep policy
    // into retainOnDelete, so `pulumi destroy` leaves them.
    const crds = objects.filter((o) => o.kind === 'CustomResourceDefinition');
    expect(crds).toHaveLength(2);
    for (const crd of crds) {
      expect(crd.metadata.annotations?.['helm.sh/resource-policy']).toBe('keep');
    }
    find<Service>(objects, 'Service', names.gatewayService);
    find<Service>(objects, 'Service', names.metricsService);
    for (const [role, name] of Object.entries(names.deployments)) {
      const d = find<Deployment>(objects, 'Deployment', name);
      expect(d.spec.replicas, role).toBe({ operator: 1, gateway: 3, worker: 2 }[role]);
      const e = envOf(container(d));
      expect(e.get('REDIS_URL')?.valueFrom?.secretKeyRef).toEqual({
        name: names.redisSecret,
        key: 'redis-url',
      });
      expect(container(d).image).toBe('ghcr.io/hookgate/hookgate:2.0.0');
    }
    expect(
      envOf(container(find<Deployment>(objects, 'Deployment', names.deployments.operator))).get(
        'HOOKGATE_LEADER_ELECTION',
      )?.value,
    ).toBe('false');
    const worker = envOf(
      container(find<Deployment>(objects, 'Deployment', names.deployments.worker)),
    );
    expect(worker.get('HOOKGATE_WORKER_CONCURRENCY')?.value).toBe('16');
    expect(worker.get('HOOKGATE_WORKER_CLAIM_IDLE_MS')?.value).toBe('60000');
    const gateway = envOf(
      container(find<Deployment>(objects, 'Deployment', names.deployments.gateway)),
    );
    expect(gateway.get('HOOKGATE_EXECUTIONS')?.value).toBe('queue');
    expect(gateway.get('HOOKGATE_MAX_QUEUED')?.value).toBe('100000');
  });
});

function isStringMap(ap: unknown): boolean {
  return (
    typeof ap === 'object' && ap !== null && (ap as Record<string, unknown>)['type'] === 'string'
  );
}

/** Every object of the release carries the recommended labels and sits in its namespace. */
function expectRecommendedLabels(objects: K8sObject[]): void {
  for (const o of objects) {
    const labels = o.metadata.labels ?? {};
    // The CRDs are generated (operator/api/render-crds.ts) and shared by every
    // release, so they carry only the release-independent labels.
    if (o.kind === 'CustomResourceDefinition') {
      expect(labels).toMatchObject({
        'app.kubernetes.io/name': 'hookgate',
        'app.kubernetes.io/part-of': 'hookgate',
      });
      continue;
    }
    expect(labels, `${o.kind}/${o.metadata.name}`).toEqual({
      'helm.sh/chart': 'hookgate-0.1.0',
      'app.kubernetes.io/name': 'hookgate',
      'app.kubernetes.io/instance': RELEASE,
      'app.kubernetes.io/component': expect.stringMatching(
        /^(operator|gateway|worker|metrics|network)$/,
      ),
      'app.kubernetes.io/version': '0.1.0',
      'app.kubernetes.io/part-of': 'hookgate',
      'app.kubernetes.io/managed-by': 'Helm',
    });
    const clusterScoped = o.kind === 'ClusterRole' || o.kind === 'ClusterRoleBinding';
    expect(o.metadata.namespace, `${o.kind}/${o.metadata.name}`).toBe(
      clusterScoped ? undefined : NAMESPACE,
    );
  }
}
