// HookgateDeployment's resource wiring under pulumi.runtime.setMocks: which children it
// registers, with which parent, options and key inputs, and the outputs it registers.
// The mocks refuse any resource type and any call the component has no business making.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as pulumi from '@pulumi/pulumi';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { HookgateDeployment } from '../../infra/hookgate.ts';
import { DEFAULT_IMAGE_REPOSITORY, chartPath } from '../../infra/plan.ts';
import { eventually } from '../support/eventually.ts';
import {
  SECRET_SIG,
  SECRET_SIG_VALUE,
  T,
  childUrn,
  installStrictMocks,
  valueOf,
  type Recorder,
} from './mocks.ts';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const MOCKS = fileURLToPath(new URL('./mocks.ts', import.meta.url));
const COMPONENT = fileURLToPath(new URL('../../infra/hookgate.ts', import.meta.url));

let rec: Recorder;
beforeAll(async () => {
  rec = await installStrictMocks();
});
beforeEach(() => rec.reset());
afterEach(() => {
  expect(rec.refused).toEqual([]);
});

/** Builds a component and waits until it and its children are registered with outputs. */
async function deploy(
  name: string,
  args: ConstructorParameters<typeof HookgateDeployment>[1],
  childCount: number,
) {
  const component = new HookgateDeployment(name, args);
  const urn = await valueOf(component.urn);
  await eventually(() => {
    expect(rec.registrations.filter((r) => r.parent === urn)).toHaveLength(childCount);
    expect(rec.outputsByUrn.has(urn)).toBe(true);
  });
  const children = rec.registrations.filter((r) => r.parent === urn);
  const byType = (type: string) => children.filter((c) => c.type === type);
  return { component, urn, children, byType, outputs: rec.outputsByUrn.get(urn) ?? {} };
}

function one<I>(items: I[], what: string): I {
  expect(items, what).toHaveLength(1);
  return items[0] as I;
}

const baseArgs = {
  namespace: 'hooks',
  image: { tag: '1.2.3' },
  baseUrl: 'https://hooks.example.com/',
  redis: { url: pulumi.secret('redis://:s3cret@redis.hooks.svc:6379') },
};

describe('HookgateDeployment (pulumi mocks)', () => {
  it('registers a namespace and the chart, which runs its own Redis, by default', async () => {
    const { redis: _url, ...defaults } = baseArgs;
    const { children, byType } = await deploy('hookgate', defaults, 2);
    expect(children.map((c) => c.type).sort()).toEqual([T.chart, T.namespace].sort());
    const chart = one(byType(T.chart), 'chart');
    expect(chart.inputs['values']).toMatchObject({
      image: { repository: 'localhost/hookgate', tag: '1.2.3' },
      redis: { enabled: true },
      externalRedis: { url: '', existingSecret: { name: '', key: 'redis-url' } },
    });
    // No password anywhere in the inputs: the chart generates it in the cluster.
    expect(JSON.stringify(chart.inputs)).not.toMatch(/password/i);
  });

  it('registers the component, with a namespace, a Secret for a Redis URL and the chart as children', async () => {
    const { urn, children, byType, outputs } = await deploy('hookgate', baseArgs, 3);

    const self = one(
      rec.registrations.filter((r) => r.type === T.component),
      'component',
    );
    expect(self).toMatchObject({ name: 'hookgate', custom: false, parent: expect.any(String) });
    expect(urn).toMatch(/::hookgate:index:HookgateDeployment::hookgate$/);

    // Only the expected kinds, each a direct child of the component.
    expect(children.map((c) => c.type).sort()).toEqual([T.chart, T.namespace, T.secret].sort());

    const ns = one(byType(T.namespace), 'namespace');
    expect(ns.name).toBe('hookgate-namespace');
    expect(ns.inputs['metadata']).toEqual({
      name: 'hooks',
      labels: {
        'app.kubernetes.io/name': 'hookgate',
        'app.kubernetes.io/instance': 'hookgate',
        'app.kubernetes.io/component': 'namespace',
        'app.kubernetes.io/part-of': 'hookgate',
        'app.kubernetes.io/managed-by': 'pulumi',
      },
    });
    expect(ns.retainOnDelete).toBe(false);

    const secret = one(byType(T.secret), 'redis secret');
    expect(secret.name).toBe('hookgate-redis-url');
    expect(secret.inputs['metadata']).toMatchObject({
      name: 'hookgate-redis-url',
      namespace: 'hooks',
    });
    expect(secret.inputs['type']).toBe('Opaque');
    // Sent to the engine as a secret (Pulumi's secret signature wraps the value).
    expect(secret.inputs['stringData']).toEqual({
      [SECRET_SIG]: SECRET_SIG_VALUE,
      value: { 'redis-url': 'redis://:s3cret@redis.hooks.svc:6379' },
    });

    const chart = one(byType(T.chart), 'chart');
    expect(chart.name).toBe('hookgate');
    expect(chart.custom).toBe(false);
    expect(chart.inputs).toMatchObject({
      chart: chartPath(),
      name: 'hookgate',
      namespace: 'hooks',
    });
    const values = chart.inputs['values'] as Record<string, unknown>;
    expect(values).toMatchObject({
      image: { repository: DEFAULT_IMAGE_REPOSITORY, tag: '1.2.3' },
      // The chart installs the CRDs; their keep policy makes the provider retain them.
      crds: { enabled: true },
      config: { baseUrl: 'https://hooks.example.com', trustedProxies: [], logLevel: 'info' },
      redis: { enabled: false },
      externalRedis: {
        url: '',
        existingSecret: { name: 'hookgate-redis-url', key: 'redis-url' },
      },
      operator: { replicas: 2, leaderElection: { enabled: true } },
      gateway: { replicas: 2, executions: 'queue', maxQueued: 100_000 },
      worker: { replicas: 2, concurrency: 32, claimIdleMs: 60_000 },
    });
    // The URL lives in the Secret only, never in the Helm values.
    expect(JSON.stringify(chart.inputs)).not.toContain('s3cret');

    // The chart waits for the namespace and the Secret.
    expect([...chart.dependencies].sort()).toEqual([ns, secret].map(childUrn).sort());

    expect(outputs).toEqual({
      namespace: 'hooks',
      releaseName: 'hookgate',
      gatewayServiceName: 'hookgate-gateway',
      adminServiceName: 'hookgate-admin',
      baseUrl: 'https://hooks.example.com',
      crdsInstalled: true,
    });
  });

  it('uses an existing namespace and Redis Secret, and leaves the CRDs out when asked', async () => {
    const { byType, children, outputs } = await deploy(
      'edge',
      {
        ...baseArgs,
        namespace: 'shared',
        createNamespace: false,
        releaseName: 'edge',
        crds: false,
        redis: { existingSecret: { name: 'redis-creds', key: 'url' } },
        replicas: { operator: 1, gateway: 4, worker: 0 },
        executions: 'inline',
        trustedProxies: ['10.0.0.0/8'],
        networkPolicy: true,
      },
      1,
    );
    expect(children.map((c) => c.type)).toEqual([T.chart]);
    const chart = one(byType(T.chart), 'chart');
    expect(chart.inputs).toMatchObject({ name: 'edge', namespace: 'shared' });
    expect(chart.dependencies).toEqual([]);
    expect(chart.inputs['values']).toMatchObject({
      redis: { enabled: false },
      externalRedis: { url: '', existingSecret: { name: 'redis-creds', key: 'url' } },
      operator: { replicas: 1, leaderElection: { enabled: false } },
      gateway: { replicas: 4, executions: 'inline' },
      worker: { replicas: 0 },
      config: { trustedProxies: ['10.0.0.0/8'] },
      networkPolicy: { enabled: true },
      crds: { enabled: false },
    });
    expect(outputs).toEqual({
      namespace: 'shared',
      releaseName: 'edge',
      gatewayServiceName: 'edge-hookgate-gateway',
      adminServiceName: 'edge-hookgate-admin',
      baseUrl: 'https://hooks.example.com',
      crdsInstalled: false,
    });
  });

  it('refuses a Redis URL from a secret Output once it is known, without repeating it', async () => {
    // As `pulumi config set --secret redisUrl http://...` hands it over: an Output that
    // validateArgs cannot read, known at preview. The check rejects inside the Output, so
    // the Secret's inputs cannot be serialized and the program fails, as under the
    // engine; that failure surfaces as unhandled rejections in the SDK, so the program
    // runs in a process of its own (Node type stripping, the same strict mocks).
    const script = [
      `const { installStrictMocks } = await import(${JSON.stringify(MOCKS)});`,
      `const rec = await installStrictMocks();`,
      `const pulumi = await import('@pulumi/pulumi');`,
      `const { HookgateDeployment } = await import(${JSON.stringify(COMPONENT)});`,
      `process.on('exit', () => console.log('registered ' + rec.registrations.map((r) => r.type).join(',')));`,
      `new HookgateDeployment('typo', { namespace: 'hooks', image: { tag: '1.2.3' },`,
      `  baseUrl: 'https://hooks.example.com', redis: { url: pulumi.secret('http://:s3cret@redis:6379') } });`,
    ].join('\n');
    const result = await new Promise<{ code: number; stdout: string; stderr: string }>(
      (resolve) => {
        execFile(
          process.execPath,
          ['--input-type=module', '-e', script],
          { timeout: 30_000, cwd: REPO },
          (err, stdout, stderr) =>
            resolve({
              code: err ? (typeof err.code === 'number' ? err.code : 1) : 0,
              stdout,
              stderr,
            }),
        );
      },
    );
    expect(result.code, result.stderr).not.toBe(0);
    expect(result.stderr).toContain(
      'HookgateDeployment "typo": redis.url must start with redis://, rediss:// or redis+cluster://',
    );
    expect(result.stderr + result.stdout).not.toContain('s3cret');
    // Neither the Secret nor the chart (which waits for it) was registered.
    expect(result.stdout).not.toContain(T.secret);
    expect(result.stdout).not.toContain(T.chart);
  });

  it('refuses invalid arguments before registering any child', () => {
    const before = rec.registrations.length;
    expect(
      () =>
        new HookgateDeployment('broken', {
          ...baseArgs,
          namespace: 'Not_A_Label',
          baseUrl: 'hooks.example.com',
        }),
    ).toThrow(
      'HookgateDeployment "broken": namespace "Not_A_Label" is not a DNS-1123 label; baseUrl "hooks.example.com" is not an absolute URL',
    );
    expect(rec.registrations.slice(before).filter((r) => r.type !== T.component)).toEqual([]);
  });
});
