// HookgateDeployment's resource wiring under pulumi.runtime.setMocks: which children it
// registers, with which parent, options and key inputs, and the outputs it registers.
// The mocks refuse any resource type and any call the component has no business making.
import * as pulumi from '@pulumi/pulumi';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { HookgateDeployment } from '../../infra/hookgate.ts';
import { COMPONENT_TYPE, DEFAULT_IMAGE_REPOSITORY, chartPath } from '../../infra/plan.ts';
import { eventually } from '../support/eventually.ts';

const T = {
  component: COMPONENT_TYPE,
  namespace: 'kubernetes:core/v1:Namespace',
  crd: 'kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition',
  secret: 'kubernetes:core/v1:Secret',
  chart: 'kubernetes:helm.sh/v4:Chart',
} as const;
const EXPECTED_TYPES = new Set<string>(Object.values(T));
// pulumi.runtime.specialSigKey / specialSecretSig: how a secret value looks on the wire.
const SECRET_SIG = pulumi.runtime.specialSigKey;
const SECRET_SIG_VALUE = pulumi.runtime.specialSecretSig;

/** What the mock monitor saw for one registration. */
interface Registration {
  type: string;
  name: string;
  custom: boolean;
  parent: string;
  retainOnDelete: boolean;
  dependencies: string[];
  /** The inputs, as newResource received them (secrets unwrapped by the mock layer). */
  inputs: Record<string, unknown>;
}

// The parts of the mock monitor's gRPC requests read here. The monitor is the SDK's own
// MockMonitor; wrapping it is the only way to see parents and resource options.
interface RegisterResourceRequest {
  getType(): string;
  getName(): string;
  getCustom(): boolean;
  getParent(): string;
  getRetainondelete(): boolean;
  getDependenciesList(): string[];
}
interface RegisterOutputsRequest {
  getUrn(): string;
  getOutputs(): { toJavaScript(): Record<string, unknown> } | undefined;
}
type Callback = (err: Error | null, res?: unknown) => void;
interface WrappableMonitor {
  registerResource(req: RegisterResourceRequest, cb: Callback): void;
  registerResourceOutputs(req: RegisterOutputsRequest, cb: Callback): void;
}

const inputsByKey = new Map<string, Record<string, unknown>>();
let registrations: Registration[] = [];
const outputsByUrn = new Map<string, Record<string, unknown>>();
/**
 * Everything the mocks refused; checked empty after each test. (A refused registration
 * also surfaces as an unhandled rejection from the SDK, which fails the run by itself.)
 */
const refused: string[] = [];

beforeAll(async () => {
  await pulumi.runtime.setMocks(
    {
      newResource(args: pulumi.runtime.MockResourceArgs): pulumi.runtime.MockResourceResult {
        if (!EXPECTED_TYPES.has(args.type)) {
          refused.push(`resource ${args.type} "${args.name}"`);
          throw new Error(`unexpected resource ${args.type} "${args.name}"`);
        }
        const inputs = args.inputs as Record<string, unknown>;
        inputsByKey.set(`${args.type}::${args.name}`, inputs);
        return { id: args.custom ? `${args.name}-id` : undefined, state: inputs };
      },
      call(args: pulumi.runtime.MockCallArgs): pulumi.runtime.MockCallResult {
        refused.push(`call ${args.token}`);
        throw new Error(`unexpected call ${args.token}`);
      },
    },
    'hookgate',
    'test',
    false,
  );
  // The SDK types the monitor as a gRPC client; the mock behind it has these two methods.
  const monitor = pulumi.runtime.getMonitor() as unknown as WrappableMonitor;
  const register = monitor.registerResource.bind(monitor);
  monitor.registerResource = (req, cb) => {
    register(req, (err, res) => {
      if (!err) {
        const key = `${req.getType()}::${req.getName()}`;
        registrations.push({
          type: req.getType(),
          name: req.getName(),
          custom: req.getCustom(),
          parent: req.getParent(),
          retainOnDelete: req.getRetainondelete(),
          dependencies: req.getDependenciesList(),
          inputs: inputsByKey.get(key) ?? {},
        });
      }
      cb(err, res);
    });
  };
  const registerOutputs = monitor.registerResourceOutputs.bind(monitor);
  monitor.registerResourceOutputs = (req, cb) => {
    outputsByUrn.set(req.getUrn(), req.getOutputs()?.toJavaScript() ?? {});
    registerOutputs(req, cb);
  };
});

beforeEach(() => {
  refused.length = 0;
  registrations = [];
  inputsByKey.clear();
  outputsByUrn.clear();
});

afterEach(() => {
  expect(refused).toEqual([]);
});

function valueOf<T>(output: pulumi.Output<T>): Promise<T> {
  return new Promise((resolve) => output.apply((v) => resolve(v)));
}

/** Builds a component and waits until it and its children are registered with outputs. */
async function deploy(
  name: string,
  args: ConstructorParameters<typeof HookgateDeployment>[1],
  childCount: number,
) {
  const component = new HookgateDeployment(name, args);
  const urn = await valueOf(component.urn);
  await eventually(() => {
    expect(registrations.filter((r) => r.parent === urn)).toHaveLength(childCount);
    expect(outputsByUrn.has(urn)).toBe(true);
  });
  const children = registrations.filter((r) => r.parent === urn);
  const byType = (type: string) => children.filter((c) => c.type === type);
  return { component, urn, children, byType, outputs: outputsByUrn.get(urn) ?? {} };
}

function one<T>(items: T[], what: string): T {
  expect(items, what).toHaveLength(1);
  return items[0] as T;
}

const baseArgs = {
  namespace: 'hooks',
  image: { tag: '1.2.3' },
  baseUrl: 'https://hooks.example.com/',
  redis: { url: pulumi.secret('redis://:s3cret@redis.hooks.svc:6379') },
};

describe('HookgateDeployment (pulumi mocks)', () => {
  it('registers the component, with a namespace, two retained CRDs, a Redis Secret and the chart as children', async () => {
    const { urn, children, byType, outputs } = await deploy('hookgate', baseArgs, 5);

    const self = one(
      registrations.filter((r) => r.type === T.component),
      'component',
    );
    expect(self).toMatchObject({ name: 'hookgate', custom: false, parent: expect.any(String) });
    expect(urn).toMatch(/::hookgate:index:HookgateDeployment::hookgate$/);

    // Only the expected kinds, each a direct child of the component.
    expect(children.map((c) => c.type).sort()).toEqual(
      [T.crd, T.crd, T.chart, T.namespace, T.secret].sort(),
    );

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

    const crds = byType(T.crd);
    expect(crds.map((c) => c.name).sort()).toEqual([
      'hookgate-webhooktriggers.hookgate.dev',
      'hookgate-workflows.hookgate.dev',
    ]);
    for (const crd of crds) {
      // Deleting a CRD would delete every custom resource: kept when the stack drops it.
      expect(crd.retainOnDelete, crd.name).toBe(true);
      const spec = crd.inputs['spec'] as { group: string; scope: string; versions: unknown[] };
      expect(spec.group).toBe('hookgate.dev');
      expect(spec.scope).toBe('Namespaced');
      expect(spec.versions.length).toBeGreaterThan(0);
    }

    const secret = one(byType(T.secret), 'redis secret');
    expect(secret.name).toBe('hookgate-redis');
    expect(secret.inputs['metadata']).toMatchObject({ name: 'hookgate-redis', namespace: 'hooks' });
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
      crds: { enabled: false },
      config: { baseUrl: 'https://hooks.example.com', trustedProxies: [], logLevel: 'info' },
      redis: { url: '', existingSecret: { name: 'hookgate-redis', key: 'redis-url' } },
      operator: { replicas: 2, leaderElection: { enabled: true } },
      gateway: { replicas: 2 },
      worker: { replicas: 2 },
    });
    // The URL lives in the Secret only, never in the Helm values.
    expect(JSON.stringify(chart.inputs)).not.toContain('s3cret');

    // The chart waits for the namespace, the CRDs and the Secret.
    const childUrn = (r: Registration) =>
      `urn:pulumi:test::hookgate::${COMPONENT_TYPE}$${r.type}::${r.name}`;
    expect([...chart.dependencies].sort()).toEqual([ns, secret, ...crds].map(childUrn).sort());

    expect(outputs).toEqual({
      namespace: 'hooks',
      releaseName: 'hookgate',
      gatewayServiceName: 'hookgate-gateway',
      baseUrl: 'https://hooks.example.com',
      crdNames: ['webhooktriggers.hookgate.dev', 'workflows.hookgate.dev'],
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
      redis: { url: '', existingSecret: { name: 'redis-creds', key: 'url' } },
      operator: { replicas: 1, leaderElection: { enabled: false } },
      gateway: { replicas: 4 },
      worker: { replicas: 0 },
      config: { trustedProxies: ['10.0.0.0/8'] },
      networkPolicy: { enabled: true },
    });
    expect(outputs).toEqual({
      namespace: 'shared',
      releaseName: 'edge',
      gatewayServiceName: 'edge-hookgate-gateway',
      baseUrl: 'https://hooks.example.com',
      crdNames: [],
    });
  });

  it('refuses invalid arguments before registering any child', () => {
    const before = registrations.length;
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
    expect(registrations.slice(before).filter((r) => r.type !== T.component)).toEqual([]);
  });
});
