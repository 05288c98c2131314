// The Helm chart (charts/hookgate) through a real helm v4 binary: lint, render with
// `helm template` and read the objects back (helpers in ./chart.ts). The chart's Redis
// has its own suite (redis.test.ts), and every rendered object is validated against the
// Kubernetes API in kube-schema.test.ts.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { chartValues, resolveArgs, resourceNames, type PlanArgs } from '../../infra/plan.ts';
import {
  ALL_OPT_INS,
  CHART_REDIS_URL,
  EXTERNAL_REDIS_SECRET,
  FULLNAME,
  NAMESPACE,
  RELEASE,
  ROLES,
  chartDir,
  dryRunInstall,
  container,
  deployment,
  redisStatefulSet,
  envOf,
  find,
  helm,
  kinds,
  names,
  parseObjects,
  render,
  renderArgs,
  renderError,
  repoRoot,
  setArgs,
  templateArgs,
  tools,
  work,
  type Deployment,
  type K8sObject,
  type Service,
  type StatefulSet,
} from './chart.ts';
import { budgetSettings } from '../../roles/budget-settings.ts';
import { logOutputSettings } from '../../roles/log-settings.ts';

interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  resourceNames?: string[];
  verbs: string[];
}
interface ServiceMonitor extends K8sObject {
  spec: { selector: { matchLabels: Record<string, string> }; endpoints: { port: string }[] };
}
interface NetworkPolicy extends K8sObject {
  spec: {
    podSelector: { matchLabels: Record<string, string>; matchExpressions?: unknown[] };
    ingress: { ports: { port: string }[]; from?: unknown[] }[];
    policyTypes: string[];
  };
}
interface PodDisruptionBudget extends K8sObject {
  spec: {
    maxUnavailable: number;
    unhealthyPodEvictionPolicy?: string;
    selector: { matchLabels: Record<string, string> };
  };
}
interface Ingress extends K8sObject {
  spec: { ingressClassName: string; tls: unknown[]; rules: unknown[] };
}
interface ClusterRole extends K8sObject {
  rules: PolicyRule[];
}
type Role = ClusterRole;
interface ClusterRoleBinding extends K8sObject {
  roleRef: unknown;
  subjects: unknown[];
}

const DEFAULT_KINDS = [
  'ClusterRole',
  'ClusterRoleBinding',
  'ClusterRoleBinding',
  'ConfigMap',
  'CustomResourceDefinition',
  'CustomResourceDefinition',
  'Deployment',
  'Deployment',
  'Deployment',
  'PodDisruptionBudget',
  'PodDisruptionBudget',
  'PodDisruptionBudget',
  'Role',
  'RoleBinding',
  'Secret',
  'Service',
  'Service',
  'Service',
  'Service',
  'ServiceAccount',
  'ServiceAccount',
  'ServiceAccount',
  'ServiceAccount',
  'StatefulSet',
];
/** What the chart's Redis adds (redis.enabled, the default). */
const REDIS_OBJECTS = [
  `ConfigMap/${FULLNAME}-redis`,
  `Secret/${FULLNAME}-redis`,
  `Service/${FULLNAME}-redis`,
  `ServiceAccount/${FULLNAME}-redis`,
  `StatefulSet/${FULLNAME}-redis`,
];
const OPT_IN_KINDS = ['Ingress', 'NetworkPolicy', 'ServiceMonitor'];

/** The NOTES of `helm install --dry-run=client` with the given values. */
async function notes(...sets: string[]): Promise<string> {
  const r = await dryRunInstall(...sets);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout.slice(r.stdout.indexOf('NOTES:'));
}

describe.skipIf(!tools)('helm chart charts/hookgate', () => {
  it('passes helm lint --strict, with defaults and with every opt-in enabled', async () => {
    const plain = await helm(['lint', '--strict', chartDir]);
    expect(plain.stdout + plain.stderr).toContain('0 chart(s) failed');
    expect(plain.code).toBe(0);
    for (const sets of [ALL_OPT_INS, [...ALL_OPT_INS, ...EXTERNAL_REDIS_SECRET]]) {
      const all = await helm(['lint', '--strict', chartDir, ...setArgs(sets)]);
      expect(all.code, all.stdout + all.stderr).toBe(0);
    }
  });

  it('runs the image `npm run image` builds, tagged with the chart appVersion = package.json version', async () => {
    const chart = parse(readFileSync(join(chartDir, 'Chart.yaml'), 'utf8')) as {
      appVersion: string;
    };
    const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
      version: string;
    };
    expect(chart.appVersion).toBe(pkg.version);
    const objects = await render();
    for (const role of ROLES) {
      const c = container(deployment(objects, role));
      expect(c.image, role).toBe(`localhost/hookgate:${pkg.version}`);
      expect(c.imagePullPolicy).toBe('IfNotPresent');
    }
    // A pushed image: repository and tag from values, the role still from args.
    const pushed = await render(
      'image.repository=registry.example.com/hookgate',
      'image.tag=0.2.0-rc.1',
      'image.pullPolicy=Always',
    );
    const gw = container(deployment(pushed, 'gateway'));
    expect(gw.image).toBe('registry.example.com/hookgate:0.2.0-rc.1');
    expect(gw.imagePullPolicy).toBe('Always');
    expect(gw.args).toEqual(['gateway']);
  });

  it('renders the expected objects with defaults, each with the recommended labels', async () => {
    const objects = await render();
    expect(kinds(objects)).toEqual(DEFAULT_KINDS);
    expect(names(objects)).toEqual([
      'ClusterRole/hg-hookgate-operator',
      'ClusterRoleBinding/hg-hookgate-gateway-auth-delegator',
      'ClusterRoleBinding/hg-hookgate-operator',
      'ConfigMap/hg-hookgate-redis',
      'CustomResourceDefinition/webhooktriggers.hookgate.dev',
      'CustomResourceDefinition/workflows.hookgate.dev',
      'Deployment/hg-hookgate-gateway',
      'Deployment/hg-hookgate-operator',
      'Deployment/hg-hookgate-worker',
      'PodDisruptionBudget/hg-hookgate-gateway',
      'PodDisruptionBudget/hg-hookgate-operator',
      'PodDisruptionBudget/hg-hookgate-worker',
      'Role/hg-hookgate-operator-leader-election',
      'RoleBinding/hg-hookgate-operator-leader-election',
      'Secret/hg-hookgate-redis',
      'Service/hg-hookgate-admin',
      'Service/hg-hookgate-gateway',
      'Service/hg-hookgate-metrics',
      'Service/hg-hookgate-redis',
      'ServiceAccount/hg-hookgate',
      'ServiceAccount/hg-hookgate-gateway',
      'ServiceAccount/hg-hookgate-redis',
      'ServiceAccount/hg-hookgate-worker',
      'StatefulSet/hg-hookgate-redis',
    ]);
    expectRecommendedLabels(objects);

    // With a Redis of your own, the chart's Redis objects are not rendered.
    const external = await render(...EXTERNAL_REDIS_SECRET);
    expect(names(external)).toEqual(names(objects).filter((n) => !REDIS_OBJECTS.includes(n)));
    expectRecommendedLabels(external);
  });

  it('puts the recommended labels on the opt-in objects too', async () => {
    const objects = await render(...ALL_OPT_INS);
    expect(kinds(objects.filter((o) => OPT_IN_KINDS.includes(o.kind)))).toEqual([
      'Ingress',
      'Ingress',
      'NetworkPolicy',
      'NetworkPolicy',
      'ServiceMonitor',
    ]);
    expectRecommendedLabels(objects);
  });

  it('gives each Deployment selector labels that its pods carry, and the labels of its role', async () => {
    const objects = await render();
    for (const role of ROLES) {
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

  it('fails helm install and helm template with the schema message for an unknown key or a wrong type', async () => {
    const install = async (...sets: string[]): Promise<string> => {
      const r = await dryRunInstall(...sets);
      expect(r.code, `helm install unexpectedly succeeded with ${sets.join(' ')}`).not.toBe(0);
      return r.stderr;
    };
    for (const run of [install, renderError]) {
      const unknown = await run('redis.persistance.size=1Gi');
      expect(unknown).toContain("values don't meet the specifications of the schema(s)");
      expect(unknown).toMatch(/at '\/redis': additional properties 'persistance' not allowed/);
      const wrongType = await run('redis.enabled=maybe');
      expect(wrongType).toMatch(/at '\/redis\/enabled': got string, want boolean/);
      expect(await run('gateway.replicas=two')).toMatch(
        /at '\/gateway\/replicas': got string, want null or integer/,
      );
      expect(await run('image.pullPolicy=Sometimes')).toMatch(
        /at '\/image\/pullPolicy': value must be one of/,
      );
    }
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
    expect(await renderError('config.redisClient.commandTimeoutMs=0')).toMatch(
      /\/config\/redisClient\/commandTimeoutMs/,
    );
    expect(await renderError('config.logOutput.bufferBytes=4XB')).toMatch(
      /at '\/config\/logOutput\/bufferBytes': '4XB' does not match pattern/,
    );
    expect(await renderError('config.logOutput.bufferBytes=65535')).toMatch(
      /\/config\/logOutput\/bufferBytes/,
    );
    expect(await renderError('config.logOutput.bufferBytes=67108865')).toMatch(
      /\/config\/logOutput\/bufferBytes/,
    );
    expect(await renderError('config.logOutput.stallMs=99')).toMatch(
      /\/config\/logOutput\/stallMs/,
    );
    expect(await renderError('config.logOutput.stallMs=20001')).toMatch(
      /\/config\/logOutput\/stallMs/,
    );
    expect(await renderError('config.logOutput.syncFlushMs=-1')).toMatch(
      /\/config\/logOutput\/syncFlushMs/,
    );
    expect(await renderError('config.logOutput.syncFlushMs=5001')).toMatch(
      /\/config\/logOutput\/syncFlushMs/,
    );
    expect(await renderError('config.logOutput.bufferLines=100')).toMatch(
      /additional properties 'bufferLines' not allowed/,
    );
    expect(await renderError('config.budgets.executionStoreBytes=512XB')).toMatch(
      /at '\/config\/budgets\/executionStoreBytes': '512XB' does not match pattern/,
    );
    expect(await renderError('config.budgets.storedBodyBytes=100')).toMatch(
      /\/config\/budgets\/storedBodyBytes/,
    );
    expect(await renderError('config.budgets.executionTtlMs=999')).toMatch(
      /\/config\/budgets\/executionTtlMs/,
    );
    expect(await renderError('config.budgets.maxBytes=1Mi')).toMatch(
      /additional properties 'maxBytes' not allowed/,
    );
    expect(await renderError('redis.enabled=false', 'externalRedis.url=http://redis:6379')).toMatch(
      /\/externalRedis\/url/,
    );
    expect(await renderError('redis.maxmemory=1GiB')).toMatch(/\/redis\/maxmemory/);
    expect(await renderError('redis.persistence.size=lots')).toMatch(/\/redis\/persistence\/size/);
    expect(await renderError('redis.podSecurityContext.runAsUser=0')).toMatch(
      /\/redis\/podSecurityContext\/runAsUser/,
    );
    expect(await renderError('podSecurityContext.runAsUser=0')).toMatch(
      /\/podSecurityContext\/runAsUser/,
    );
    expect(await renderError('tmpDir.sizeLimit=64 MB')).toMatch(/\/tmpDir\/sizeLimit/);
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
        // Fixed shape: closed. Free-form maps (labels, annotations, nodeSelector): strings
        // only, or closed objects (outbound.namespaces: namespace -> { allow, deny }).
        const closed = 'properties' in s ? ap === false : isStringMap(ap) || isClosedObject(ap);
        if (!closed) open.push(path || '/');
      }
      for (const [k, v] of Object.entries(s)) walk(v, `${path}/${k}`);
    };
    walk(schema, '');
    expect(open).toEqual([]);
  });

  it('ships a PodDisruptionBudget per role by default that lets a drain take one pod at a time', async () => {
    // A drain must never evict both gateways (or all workers, both operators) at once,
    // and must never be blocked: maxUnavailable 1 lets one pod go even with 1 replica
    // (minAvailable 1 would block it), and AlwaysAllow lets pods that are not ready go
    // (a crash-looping role, or all of them not ready, would otherwise hold the node).
    const objects = await render();
    for (const role of ROLES) {
      const pdb = find<PodDisruptionBudget>(objects, 'PodDisruptionBudget', `hg-hookgate-${role}`);
      expect(pdb.spec, role).toEqual({
        maxUnavailable: 1,
        unhealthyPodEvictionPolicy: 'AlwaysAllow',
        selector: { matchLabels: deployment(objects, role).spec.selector.matchLabels },
      });
    }
    const single = await render(
      'gateway.replicas=1',
      'operator.replicas=1',
      'operator.leaderElection.enabled=false',
      'worker.replicas=1',
    );
    expect(kinds(single).filter((k) => k === 'PodDisruptionBudget')).toHaveLength(3);
    // Off on request: no PodDisruptionBudget at all.
    const off = await render('podDisruptionBudget.enabled=false');
    expect(kinds(off).filter((k) => k === 'PodDisruptionBudget')).toEqual([]);
    expect(off.length).toBe(objects.length - 3);
  });

  it('renders the opt-in objects only when enabled, each on its own flag', async () => {
    const defaults = await render();
    expect(defaults.filter((o) => OPT_IN_KINDS.includes(o.kind))).toEqual([]);

    const cases: [string[], string[]][] = [
      [['metrics.serviceMonitor.enabled=true'], ['ServiceMonitor']],
      [['networkPolicy.enabled=true'], ['NetworkPolicy', 'NetworkPolicy']],
      [['networkPolicy.enabled=true', ...EXTERNAL_REDIS_SECRET], ['NetworkPolicy']],
      [['ingress.enabled=true', 'ingress.host=hooks.example.com'], ['Ingress']],
    ];
    for (const [sets, expected] of cases) {
      const objects = await render(...sets);
      expect(kinds(objects.filter((o) => OPT_IN_KINDS.includes(o.kind))), sets.join(' ')).toEqual(
        expected,
      );
      const redis = sets.includes('redis.enabled=false') ? -REDIS_OBJECTS.length : 0;
      expect(objects.length, sets.join(' ')).toBe(DEFAULT_KINDS.length + redis + expected.length);
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
    // The hookgate pods only: the chart's Redis has a NetworkPolicy of its own.
    expect(np.spec.podSelector).toEqual({
      matchLabels: { 'app.kubernetes.io/name': 'hookgate', 'app.kubernetes.io/instance': RELEASE },
      matchExpressions: [
        { key: 'app.kubernetes.io/component', operator: 'NotIn', values: ['redis'] },
      ],
    });
    expect(np.spec.ingress).toEqual([
      { ports: [{ port: 'http', protocol: 'TCP' }] },
      // The default adminFrom: the release's namespace (test/charts/network-policy.test.ts).
      { ports: [{ port: 'admin', protocol: 'TCP' }], from: [{ podSelector: {} }] },
      {
        ports: [{ port: 'metrics', protocol: 'TCP' }],
        from: [{ namespaceSelector: { matchLabels: { name: 'monitoring' } } }],
      },
    ]);

    for (const role of ROLES) {
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
            {
              // The callers' execution links (token per execution), on the same listener.
              path: '/webhook-executions/',
              pathType: 'Prefix',
              backend: { service: { name: 'hg-hookgate-gateway', port: { name: 'http' } } },
            },
          ],
        },
      },
    ]);
    // With the Ingress on and no explicit base URL, status.url points at the Ingress.
    for (const role of ROLES) {
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

  it('grants the operator exactly the RBAC it needs, bound to its own ServiceAccount', async () => {
    const objects = await render();
    const role = find<ClusterRole>(objects, 'ClusterRole', 'hg-hookgate-operator');
    // Each rule is one kind of call the operator makes (test/e2e/operator-rbac.test.ts
    // runs it under exactly these against an API server enforcing RBAC).
    expect(role.rules).toEqual([
      {
        apiGroups: ['hookgate.dev'],
        resources: ['workflows', 'webhooktriggers'],
        verbs: ['get', 'list', 'watch', 'patch'],
      },
      {
        apiGroups: ['hookgate.dev'],
        resources: ['workflows/status', 'webhooktriggers/status'],
        verbs: ['update'],
      },
      { apiGroups: [''], resources: ['secrets'], verbs: ['list', 'watch'] },
      { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
    ]);
    // The Lease: a Role in the release namespace, get and update on that one Lease.
    const lease = find<Role>(objects, 'Role', 'hg-hookgate-operator-leader-election');
    expect(lease.metadata.namespace).toBe(NAMESPACE);
    expect(lease.rules).toEqual([
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        resourceNames: ['hg-hookgate-operator'],
        verbs: ['get', 'update'],
      },
    ]);
    const leaseBinding = find<ClusterRoleBinding>(
      objects,
      'RoleBinding',
      'hg-hookgate-operator-leader-election',
    );
    expect(leaseBinding.roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'Role',
      name: 'hg-hookgate-operator-leader-election',
    });
    expect(leaseBinding.subjects).toEqual([
      { kind: 'ServiceAccount', name: 'hg-hookgate', namespace: NAMESPACE },
    ]);
    const named = await render('operator.leaderElection.leaseName=my-lease');
    expect(
      find<Role>(named, 'Role', 'hg-hookgate-operator-leader-election').rules[1],
    ).toMatchObject({ resourceNames: ['my-lease'] });
    const single = await render('operator.replicas=1', 'operator.leaderElection.enabled=false');
    expect(names(single)).not.toContain('Role/hg-hookgate-operator-leader-election');
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

    // The operator mounts its token; the gateway its own (admin.auth kubernetes:
    // TokenReview and SubjectAccessReview through system:auth-delegator, nothing else);
    // workers never call the API.
    expect(deployment(objects, 'operator').spec.template.spec.automountServiceAccountToken).toBe(
      true,
    );
    const gateway = deployment(objects, 'gateway').spec.template.spec;
    expect(gateway.automountServiceAccountToken).toBe(true);
    expect(gateway.serviceAccountName).toBe('hg-hookgate-gateway');
    const delegator = find<ClusterRoleBinding>(
      objects,
      'ClusterRoleBinding',
      'hg-hookgate-gateway-auth-delegator',
    );
    expect(delegator.roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: 'system:auth-delegator',
    });
    expect(delegator.subjects).toEqual([
      { kind: 'ServiceAccount', name: 'hg-hookgate-gateway', namespace: NAMESPACE },
    ]);
    // With a static admin token the gateway calls no API and mounts the Secret instead
    // (still as its own account, bound to nothing).
    const token = await render('admin.auth=token', 'admin.tokenSecret.name=admin-token');
    expect(names(token)).not.toContain('ClusterRoleBinding/hg-hookgate-gateway-auth-delegator');
    const tokenGateway = deployment(token, 'gateway');
    expect(tokenGateway.spec.template.spec.automountServiceAccountToken).toBe(false);
    expect(envOf(container(tokenGateway)).get('HOOKGATE_ADMIN_TOKEN_FILE')?.value).toBe(
      '/var/run/hookgate/admin/token',
    );
    expect(await renderError('admin.auth=token')).toMatch(/admin\/tokenSecret\/name/);
    expect(deployment(objects, 'worker').spec.template.spec.automountServiceAccountToken).toBe(
      false,
    );

    // Accounts of your own (named: never the namespace's default; service-accounts.test.ts).
    const noRbac = await render(
      'rbac.create=false',
      'serviceAccount.create=false',
      'serviceAccount.name=op',
      'serviceAccount.gateway.name=gw',
      'serviceAccount.worker.name=plain',
      'serviceAccount.redis.name=plain',
    );
    expect(kinds(noRbac)).not.toContain('ClusterRole');
    expect(kinds(noRbac)).not.toContain('ClusterRoleBinding');
    expect(kinds(noRbac)).not.toContain('ServiceAccount');
    expect(deployment(noRbac, 'operator').spec.template.spec.serviceAccountName).toBe('op');
  });

  it('runs the operator as 2 leader-elected replicas of `hookgate operator`', async () => {
    const objects = await render();
    const d = deployment(objects, 'operator');
    expect(d.spec.replicas).toBe(2);
    const c = container(d);
    expect(c.image).toBe('localhost/hookgate:0.1.0');
    // The image's entrypoint is the CLI: the role is its argument, no command override.
    expect(c.command).toBeUndefined();
    expect(c.args).toEqual(['operator']);
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
    expect(c.command).toBeUndefined();
    expect(c.args).toEqual(['worker']);
    // No traffic port: metrics and health only.
    expect(c.ports).toEqual([{ name: 'metrics', containerPort: 9090, protocol: 'TCP' }]);
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'metrics' });
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'metrics' });
    expect(c.lifecycle).toBeUndefined();
    const e = envOf(c);
    expect(e.get('REDIS_URL')?.value).toBe(CHART_REDIS_URL);
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
      ...EXTERNAL_REDIS_SECRET,
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
      name: 'my-redis',
      key: 'redis-url',
    });
    expect(ce.has('REDIS_PASSWORD')).toBe(false);
    expect(container(cd).readinessProbe.httpGet?.port).toBe('metrics');
    expect(container(cd).ports).toEqual([
      { name: 'metrics', containerPort: 9464, protocol: 'TCP' },
    ]);
  });

  it('queues executions for the workers by default, with the queue bound', async () => {
    const e = envOf(container(deployment(await render(), 'gateway')));
    expect(e.get('HOOKGATE_EXECUTIONS')?.value).toBe('queue');
    expect(e.get('HOOKGATE_MAX_QUEUED')?.value).toBe('100000');
    expect(e.get('HOOKGATE_QUEUE_SHARDS')?.value).toBe('1');
    // Gateways and workers get the same number of queue shards.
    const sharded = await render('config.queueShards=12');
    for (const role of ['gateway', 'worker'] as const)
      expect(envOf(container(deployment(sharded, role))).get('HOOKGATE_QUEUE_SHARDS')?.value).toBe(
        '12',
      );
    // Large numbers stay integers, not 1e+06.
    const big = envOf(container(deployment(await render('gateway.maxQueued=1000000'), 'gateway')));
    expect(big.get('HOOKGATE_MAX_QUEUED')?.value).toBe('1000000');
    // Replica acknowledgements: off by default (no variable), set when asked for.
    expect(e.has('HOOKGATE_QUEUE_ACK_REPLICAS')).toBe(false);
    const acked = envOf(
      container(
        deployment(
          await render(
            ...EXTERNAL_REDIS_SECRET,
            'gateway.ackReplicas=1',
            'gateway.ackTimeoutMs=400',
          ),
          'gateway',
        ),
      ),
    );
    expect(acked.get('HOOKGATE_QUEUE_ACK_REPLICAS')?.value).toBe('1');
    expect(acked.get('HOOKGATE_QUEUE_ACK_TIMEOUT_MS')?.value).toBe('400');
    expect(await renderError('gateway.ackReplicas=17')).toMatch(/\/gateway\/ackReplicas/);
    // The chart's Redis has no replica: every 202 would be a 503. Refused, saying why.
    expect(await renderError('gateway.ackReplicas=1')).toMatch(
      /gateway\.ackReplicas needs a Redis with replicas \(externalRedis\): the chart's Redis has none/,
    );
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
    expect(e.has('HOOKGATE_QUEUE_SHARDS')).toBe(false);
    expectRecommendedLabels(objects);
  });

  it('says in the install notes what to do next: wait, apply an example, call it, dashboard, password', async () => {
    const text = await notes();
    for (const line of [
      // The local image must be on the nodes.
      'The image is localhost/hookgate:0.1.0: a local build (`npm run image`)',
      `kubectl -n ${NAMESPACE} wait pod -l app.kubernetes.io/instance=${RELEASE} --for=condition=Ready --timeout=5m`,
      `kubectl -n ${NAMESPACE} apply -f examples/hello.yaml`,
      `kubectl -n ${NAMESPACE} wait webhooktrigger/hello --for=condition=Ready --timeout=2m`,
      `every webhook URL starts with\n   http://${FULLNAME}-gateway.${NAMESPACE}.svc/webhook/`,
      `kubectl -n ${NAMESPACE} port-forward svc/${FULLNAME}-gateway 8080:80`,
      `curl -i -X POST "http://localhost:8080$(kubectl -n ${NAMESPACE} get webhooktrigger hello -o jsonpath='{.status.basePath}')/default"`,
      `kubectl -n ${NAMESPACE} port-forward svc/${FULLNAME}-admin 8081:8081`,
      'http://localhost:8081/dashboard',
      'http://localhost:8081/api/executions',
      'Requests need a bearer token whose user may get the WebhookTriggers (RBAC)',
      `kubectl -n ${NAMESPACE} get secret ${FULLNAME}-redis -o jsonpath='{.data.redis-password}' | base64 -d`,
    ]) {
      expect(text).toContain(line);
    }
    const pushed = await notes(
      'image.repository=registry.example.com/hookgate',
      ...EXTERNAL_REDIS_SECRET,
      'redis.auth.existingSecretKey=pw',
    );
    expect(pushed).not.toContain('a local build');
    expect(pushed).not.toContain('get secret');
    expect(pushed).toContain('Redis: externalRedis (the URL in Secret my-redis)');
    const ownPassword = await notes(
      'redis.auth.existingSecret=redis-auth',
      'redis.auth.existingSecretKey=pw',
    );
    expect(ownPassword).toContain("get secret redis-auth -o jsonpath='{.data.pw}'");
  });

  it('keeps Service environment variables out of every pod of the release', async () => {
    const objects = await render();
    for (const role of ['operator', 'gateway', 'worker'])
      expect(deployment(objects, role).spec.template.spec.enableServiceLinks).toBe(false);
    expect(redisStatefulSet(objects).spec.template.spec.enableServiceLinks).toBe(false);
  });

  it('warns in the install notes when the operator may read Secrets in every namespace', async () => {
    const warning = 'The operator may read Secrets in every namespace';
    expect(await notes()).toContain(warning);
    expect(await notes('rbac.secretNamespaces={team-a,team-b}')).not.toContain(warning);
    expect(await notes('rbac.create=false')).not.toContain(warning);
  });

  it('says in the install notes where the admin API is: the Service only, or the Ingress too', async () => {
    expect(await notes()).toContain(
      'The dashboard and the read API are on the admin Service, inside the cluster only',
    );
    const published = await notes(
      'ingress.enabled=true',
      'ingress.host=hooks.example.com',
      'admin.ingress.enabled=true',
      'admin.ingress.host=admin.example.com',
      'admin.ingress.tls.enabled=true',
    );
    expect(published).not.toContain('inside the cluster only');
    expect(published).toContain(
      `The dashboard and the read API are published by the Ingress ${FULLNAME}-admin`,
    );
    expect(published).toContain('https://admin.example.com/dashboard');
    expect(published).toContain('https://admin.example.com/api/executions');
    // On the webhook host when the admin Ingress has no host of its own, with its TLS.
    const beside = await notes(
      'ingress.enabled=true',
      'ingress.host=hooks.example.com',
      'ingress.tls.enabled=true',
      'admin.ingress.enabled=true',
    );
    expect(beside).toContain('https://hooks.example.com/dashboard');
    // Plain http only when TLS ends before the ingress controller (admin.ingress.plainHttp).
    const plain = await notes(
      'ingress.enabled=true',
      'ingress.host=hooks.example.com',
      'admin.ingress.enabled=true',
      'admin.ingress.plainHttp=true',
    );
    expect(plain).toContain('http://hooks.example.com/dashboard');
  });

  it('says in the install notes when nothing runs the queued executions', async () => {
    expect(await notes()).not.toMatch(/worker\.replicas is 0|inline/);
    expect(await notes('worker.replicas=0')).toContain(
      'worker.replicas is 0: executions queue in Redis and nothing runs them',
    );
    expect(await notes('gateway.executions=inline')).toContain(
      'gateway.executions is inline: each gateway runs the executions',
    );
    // KEDA owns the worker count (worker.replicas is not used then).
    const scaled = await notes(
      'worker.replicas=0',
      'worker.autoscaling.enabled=true',
      'worker.autoscaling.minReplicas=0',
      'analytics.prometheus.url=http://prometheus.monitoring.svc:9090',
    );
    expect(scaled).toContain('worker.autoscaling is on: KEDA scales the workers from 0 to 10');
    expect(scaled).not.toContain('worker.replicas is 0');
  });

  it('says in the install notes when each gateway replica answers analytics from its own memory', async () => {
    // The default: two replicas, no Prometheus.
    expect(await notes()).toContain(
      "Analytics come from each gateway's memory (analytics.prometheus.url is not set): with\n2 gateway replicas, the dashboard and /api/analytics show the traffic of\nwhichever replica answers.",
    );
    expect(await notes('gateway.replicas=null')).toContain(
      "with\ngateway.replicas unset (an autoscaler's count), the dashboard",
    );
    for (const sets of [
      ['gateway.replicas=1'],
      ['analytics.prometheus.url=http://prometheus.monitoring.svc:9090'],
      [
        'gateway.replicas=3',
        'analytics.backend=prometheus',
        'analytics.prometheus.url=http://p:9090',
      ],
    ])
      expect(await notes(...sets), sets.join(' ')).not.toContain('from each gateway');
  });

  it('runs every hookgate pod as the image user 65532, read-only root, no capabilities, /tmp an emptyDir', async () => {
    const objects = await render();
    for (const role of ROLES) {
      const pod = deployment(objects, role).spec.template.spec;
      expect(pod.securityContext, role).toEqual({
        runAsNonRoot: true,
        runAsUser: 65532,
        runAsGroup: 65532,
        fsGroup: 65532,
        seccompProfile: { type: 'RuntimeDefault' },
      });
      const c = container(deployment(objects, role));
      expect(c.securityContext, role).toEqual({
        runAsNonRoot: true,
        runAsUser: 65532,
        runAsGroup: 65532,
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
        seccompProfile: { type: 'RuntimeDefault' },
      });
      // A writable /tmp, bounded, since the root filesystem is not writable.
      expect(c.volumeMounts).toEqual([{ name: 'tmp', mountPath: '/tmp' }]);
      expect(pod.volumes).toEqual([{ name: 'tmp', emptyDir: { sizeLimit: '64Mi' } }]);
      expect(c.command).toBeUndefined();
      expect(c.args).toEqual([role]);
    }
    const small = await render('tmpDir.sizeLimit=16Mi');
    expect(deployment(small, 'worker').spec.template.spec.volumes).toEqual([
      { name: 'tmp', emptyDir: { sizeLimit: '16Mi' } },
    ]);
  });

  it('gives every container CPU and memory requests and a memory limit, and no CPU limit', async () => {
    const objects = await render();
    const workloads = [...ROLES.map((role) => deployment(objects, role))];
    const expected: Record<string, unknown> = {
      operator: { requests: { cpu: '50m', memory: '128Mi' }, limits: { memory: '256Mi' } },
      gateway: { requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '512Mi' } },
      worker: { requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '768Mi' } },
    };
    for (const d of workloads) {
      const c = container(d);
      expect(c.resources, c.name).toEqual(expected[c.name]);
      // CPU limits throttle: a request only.
      expect(c.resources.limits).not.toHaveProperty('cpu');
    }
    const tuned = await render('operator.resources.limits.memory=600Mi');
    expect(container(deployment(tuned, 'operator')).resources.limits).toEqual({ memory: '600Mi' });
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
      { name: 'admin', containerPort: 8081, protocol: 'TCP' },
    ]);
    // The admin listener: its own ClusterIP Service, never behind the Ingress.
    const admin = find<Service>(objects, 'Service', 'hg-hookgate-admin');
    expect(admin.spec.type).toBe('ClusterIP');
    expect(admin.spec.ports).toEqual([
      { name: 'admin', port: 8081, targetPort: 'admin', protocol: 'TCP' },
    ]);
    expect(admin.spec.selector).toEqual(d.spec.selector.matchLabels);
    expect(envOf(c).get('ADMIN_PORT')?.value).toBe('8081');
    expect(envOf(c).get('HOOKGATE_ADMIN_AUTH')?.value).toBe('kubernetes');
    // Probes on the metrics port, as for the other roles: with METRICS_PORT set the
    // public port serves webhooks only.
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'metrics' });
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'metrics' });
    expect(d.spec.template.spec.terminationGracePeriodSeconds).toBe(35);
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
    for (const role of ROLES) {
      const pod = deployment(objects, role).spec.template;
      expect(pod.metadata.labels, role).toMatchObject(metrics.spec.selector);
      expect(container(deployment(objects, role)).ports.map((p) => p.name)).toContain('metrics');
    }
  });

  it('passes base URL, trusted proxies, log level and Redis to the roles', async () => {
    const defaults = await render();
    for (const role of ROLES) {
      const c = container(deployment(defaults, role));
      const e = envOf(c);
      expect(e.get('HOOKGATE_BASE_URL')?.value).toBe(`http://hg-hookgate-gateway.${NAMESPACE}.svc`);
      // The chart's Redis: the password from its Secret, expanded into the URL by the
      // kubelet, so it is never in the pod spec; REDIS_PASSWORD comes first for that.
      expect(e.get('REDIS_PASSWORD')).toEqual({
        name: 'REDIS_PASSWORD',
        valueFrom: { secretKeyRef: { name: `${FULLNAME}-redis`, key: 'redis-password' } },
      });
      expect(e.get('REDIS_URL')?.value).toBe(CHART_REDIS_URL);
      const order = c.env.map((v) => v.name);
      expect(order.indexOf('REDIS_PASSWORD')).toBeLessThan(order.indexOf('REDIS_URL'));
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
      'config.redisClient.commandTimeoutMs=250',
      'config.redisClient.breakerOpenMs=2000',
      'config.redisClient.writeWindowMs=0',
      ...EXTERNAL_REDIS_SECRET,
      'image.tag=1.2.3',
      'metrics.port=9464',
    );
    for (const role of ROLES) {
      const c = container(deployment(custom, role));
      expect(c.image).toBe('localhost/hookgate:1.2.3');
      const e = envOf(c);
      expect(e.get('HOOKGATE_BASE_URL')?.value).toBe('https://hooks.example.com');
      expect(e.get('LOG_LEVEL')?.value).toBe('debug');
      expect(e.get('METRICS_PORT')?.value).toBe('9464');
      expect(e.get('HOOKGATE_REDIS_COMMAND_TIMEOUT_MS')?.value).toBe('250');
      expect(e.get('HOOKGATE_REDIS_BREAKER_FAILURES')?.value).toBe('5');
      expect(e.get('HOOKGATE_REDIS_BREAKER_OPEN_MS')?.value).toBe('2000');
      expect(e.get('HOOKGATE_REDIS_WRITE_WINDOW_MS')?.value).toBe('0');
      expect(e.get('REDIS_URL')).toEqual({
        name: 'REDIS_URL',
        valueFrom: { secretKeyRef: { name: 'my-redis', key: 'redis-url' } },
      });
      expect(c.ports.find((p) => p.name === 'metrics')?.containerPort).toBe(9464);
    }
    expect(
      envOf(container(deployment(custom, 'gateway'))).get('HOOKGATE_TRUSTED_PROXIES')?.value,
    ).toBe('10.0.0.0/8,192.168.0.0/16');
  });

  it('gives every role config.logOutput as the roles read it, and refuses a size outside 64Ki to 64Mi', async () => {
    const LOG_OUTPUT = [
      'HOOKGATE_LOG_BUFFER_BYTES',
      'HOOKGATE_LOG_STALL_MS',
      'HOOKGATE_LOG_SYNC_FLUSH_MS',
    ];
    const logEnv = (objects: K8sObject[], role: (typeof ROLES)[number]) => {
      const e = envOf(container(deployment(objects, role)));
      return Object.fromEntries(LOG_OUTPUT.map((name) => [name, e.get(name)?.value]));
    };
    const defaults = await render();
    const set = await render(
      'config.logOutput.bufferBytes=0.5Mi',
      'config.logOutput.stallMs=100',
      'config.logOutput.syncFlushMs=0',
    );
    for (const role of ROLES) {
      // The log destination's defaults (roles/log-destination.ts), spelt out.
      expect(logEnv(defaults, role), role).toEqual({
        HOOKGATE_LOG_BUFFER_BYTES: '4Mi',
        HOOKGATE_LOG_STALL_MS: '5000',
        HOOKGATE_LOG_SYNC_FLUSH_MS: '1000',
      });
      // The roles read exactly these names and values (roles/log-settings.ts).
      expect(logOutputSettings(logEnv(set, role)), role).toEqual({
        settings: { maxBufferedBytes: 512 * 1024, stallMs: 100, syncFlushMs: 0 },
        problems: [],
      });
    }
    // The schema checks plain numbers only; a size with a unit is checked by the render.
    for (const size of ['63Ki', '65Mi', '1Gi', '0.06Mi']) {
      expect(await renderError(`config.logOutput.bufferBytes=${size}`)).toContain(
        `config.logOutput.bufferBytes must be a size from 64Ki to 64Mi (e.g. 4Mi), not "${size}"`,
      );
      expect(logOutputSettings({ HOOKGATE_LOG_BUFFER_BYTES: size }).problems).toHaveLength(1);
    }
    for (const size of ['64Ki', '64KiB', '65536', '64Mi', '64mb', '0.0625Mi']) {
      const rendered = await render(`config.logOutput.bufferBytes=${size}`);
      const value = envOf(container(deployment(rendered, 'worker'))).get(
        'HOOKGATE_LOG_BUFFER_BYTES',
      )?.value;
      expect(value).toBe(size);
      expect(logOutputSettings({ HOOKGATE_LOG_BUFFER_BYTES: size }).problems).toEqual([]);
    }
  });

  it('renders the byte budgets that are set, for the roles that read them, and none unset', async () => {
    const BUDGETS = [
      'HOOKGATE_EXECUTION_STORE_BYTES',
      'HOOKGATE_STORED_BODY_BYTES',
      'HOOKGATE_EXECUTION_TTL_MS',
      'HOOKGATE_IDEMPOTENCY_BYTES',
      'HOOKGATE_STREAM_BUFFER_BYTES',
      'HOOKGATE_LIST_PAGE_BYTES',
      'HOOKGATE_ANALYTICS_BYTES',
      'HOOKGATE_STREAMS_PER_EXECUTION',
      'HOOKGATE_STREAMS_PER_PROCESS',
    ];
    const defaults = await render();
    for (const role of ROLES) {
      const e = envOf(container(deployment(defaults, role)));
      expect(
        BUDGETS.filter((name) => e.has(name)),
        role,
      ).toEqual([]);
    }
    const set = await render(
      'config.budgets.executionStoreBytes=512Mi',
      'config.budgets.storedBodyBytes=131072',
      'config.budgets.executionTtlMs=3600000',
      'config.budgets.idempotencyBytes=64Mi',
      'config.budgets.streamBufferBytes=2Mi',
      'config.budgets.listPageBytes=1.5MiB',
      'config.budgets.analyticsBytes=16Mi',
      'config.budgets.streamsPerExecution=8',
      'config.budgets.streamsPerProcess=2500',
    );
    const value = (role: (typeof ROLES)[number], name: string) =>
      envOf(container(deployment(set, role))).get(name)?.value;
    const gateway = Object.fromEntries(BUDGETS.map((name) => [name, value('gateway', name)]));
    expect(gateway).toEqual({
      HOOKGATE_EXECUTION_STORE_BYTES: '512Mi',
      HOOKGATE_STORED_BODY_BYTES: '131072',
      HOOKGATE_EXECUTION_TTL_MS: '3600000',
      HOOKGATE_IDEMPOTENCY_BYTES: '64Mi',
      HOOKGATE_STREAM_BUFFER_BYTES: '2Mi',
      HOOKGATE_LIST_PAGE_BYTES: '1.5MiB',
      HOOKGATE_ANALYTICS_BYTES: '16Mi',
      HOOKGATE_STREAMS_PER_EXECUTION: '8',
      HOOKGATE_STREAMS_PER_PROCESS: '2500',
    });
    // The roles read exactly these names and values (roles/budget-settings.ts).
    expect(budgetSettings(gateway)).toEqual({
      budgets: {
        executionStoreBytes: 512 * 1024 ** 2,
        storedBodyBytes: 131_072,
        executionTtlMs: 3_600_000,
        idempotencyBytes: 64 * 1024 ** 2,
        streamBufferBytes: 2 * 1024 ** 2,
        listPageBytes: 1.5 * 1024 ** 2,
        analyticsBytes: 16 * 1024 ** 2,
        streamsPerExecution: 8,
        streamsPerProcess: 2500,
      },
      problems: [],
    });
    // Workers keep execution records only; the operator keeps none of these.
    const worker = Object.fromEntries(BUDGETS.map((name) => [name, value('worker', name)]));
    expect(worker).toEqual({
      HOOKGATE_EXECUTION_STORE_BYTES: '512Mi',
      HOOKGATE_STORED_BODY_BYTES: '131072',
      HOOKGATE_EXECUTION_TTL_MS: '3600000',
      HOOKGATE_IDEMPOTENCY_BYTES: undefined,
      HOOKGATE_STREAM_BUFFER_BYTES: undefined,
      HOOKGATE_LIST_PAGE_BYTES: undefined,
      HOOKGATE_ANALYTICS_BYTES: undefined,
      HOOKGATE_STREAMS_PER_EXECUTION: undefined,
      HOOKGATE_STREAMS_PER_PROCESS: undefined,
    });
    expect(BUDGETS.filter((name) => value('operator', name) !== undefined)).toEqual([]);
    // From a values file numbers are floats to helm: still rendered as whole numbers.
    const file = join(work, 'budgets.json');
    writeFileSync(
      file,
      JSON.stringify({
        config: { budgets: { storedBodyBytes: 1048576, executionTtlMs: 86400000 } },
      }),
    );
    const fromFile = envOf(
      container(deployment(await renderArgs([...templateArgs([]), '-f', file]), 'gateway')),
    );
    expect(fromFile.get('HOOKGATE_STORED_BODY_BYTES')?.value).toBe('1048576');
    expect(fromFile.get('HOOKGATE_EXECUTION_TTL_MS')?.value).toBe('86400000');
    expect(fromFile.has('HOOKGATE_LIST_PAGE_BYTES')).toBe(false);
  });

  it('accepts the values the Pulumi program computes, and names objects as it predicts', async () => {
    const renderPlan = async (args: PlanArgs): Promise<K8sObject[]> => {
      const file = join(work, 'pulumi-values.json');
      writeFileSync(file, JSON.stringify(chartValues(resolveArgs(args))));
      const r = await helm(['template', 'edge', chartDir, '--namespace', 'hooks', '-f', file]);
      expect(r.code, r.stderr).toBe(0);
      return parseObjects(r.stdout);
    };
    const base = {
      namespace: 'hooks',
      releaseName: 'edge',
      image: { tag: '2.0.0' },
      baseUrl: 'https://hooks.example.com',
    };
    const names = resourceNames('edge');

    // A Redis of your own, its URL in the Secret the component creates.
    const objects = await renderPlan({
      ...base,
      redis: { url: 'redis://redis:6379' },
      replicas: { operator: 1, gateway: 3 },
      workerConcurrency: 16,
    });
    // The chart installs the CRDs for Pulumi too; the provider turns their keep policy
    // into retainOnDelete, so `pulumi destroy` leaves them.
    const crds = objects.filter((o) => o.kind === 'CustomResourceDefinition');
    expect(crds).toHaveLength(2);
    for (const crd of crds) {
      expect(crd.metadata.annotations?.['helm.sh/resource-policy']).toBe('keep');
    }
    find<Service>(objects, 'Service', names.gatewayService);
    find<Service>(objects, 'Service', names.metricsService);
    expect(objects.filter((o) => o.metadata.name === names.redis)).toEqual([]);
    for (const [role, name] of Object.entries(names.deployments)) {
      const d = find<Deployment>(objects, 'Deployment', name);
      expect(d.spec.replicas, role).toBe({ operator: 1, gateway: 3, worker: 2 }[role]);
      const e = envOf(container(d));
      expect(e.get('REDIS_URL')?.valueFrom?.secretKeyRef).toEqual({
        name: names.redisUrlSecret,
        key: 'redis-url',
      });
      expect(container(d).image).toBe('localhost/hookgate:2.0.0');
      expect(container(d).args).toEqual([role]);
    }
    expect(
      envOf(container(find<Deployment>(objects, 'Deployment', names.deployments.operator))).get(
        'HOOKGATE_LEADER_ELECTION',
      )?.value,
    ).toBe('false');
    // One operator without a Lease: a rollout replaces it rather than running two.
    expect(
      find<Deployment>(objects, 'Deployment', names.deployments.operator).spec.strategy,
    ).toEqual({ type: 'Recreate' });
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

    // The chart's Redis (the default), with the storage and password the plan passes on.
    const own = await renderPlan({
      ...base,
      redis: {
        chart: {
          storageSize: '20Gi',
          storageClass: 'fast',
          passwordSecret: { name: 'redis-pass', key: 'pw' },
        },
      },
    });
    const sts = find<StatefulSet>(own, 'StatefulSet', names.redis);
    expect(sts.spec.volumeClaimTemplates[0]?.spec).toMatchObject({
      storageClassName: 'fast',
      resources: { requests: { storage: '20Gi' } },
    });
    find<Service>(own, 'Service', names.redis);
    // The password Secret is the caller's: the chart renders none.
    expect(own.filter((o) => o.kind === 'Secret')).toEqual([]);
    const e = envOf(container(find<Deployment>(own, 'Deployment', names.deployments.gateway)));
    expect(e.get('REDIS_PASSWORD')?.valueFrom?.secretKeyRef).toEqual({
      name: 'redis-pass',
      key: 'pw',
    });
    expect(e.get('REDIS_URL')?.value).toBe(
      `redis://:$(REDIS_PASSWORD)@${names.redis}.hooks.svc:6379`,
    );
  });
});

function isClosedObject(ap: unknown): boolean {
  const s = typeof ap === 'object' && ap !== null ? (ap as Record<string, unknown>) : undefined;
  return s?.['type'] === 'object' && 'properties' in s && s['additionalProperties'] === false;
}

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
        /^(operator|gateway|admin|worker|metrics|network|redis)$/,
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
