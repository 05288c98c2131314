// Two `hookgate operator` processes against the Kubernetes-compatible API server: one
// leads and reconciles, the other stands by; SIGTERM on the leader drains, releases
// the Lease and exits 0, and the standby takes over without waiting out the lease.
// Without Redis no gateway can serve what they deploy: a reconciled trigger says
// Ready=False, reason NoGateway.
import { spawn, type ChildProcess } from 'node:child_process';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeApiServer } from '../../testing/kube-apiserver/index.ts';
import { startTestCluster, type TestCluster } from '../support/test-cluster.ts';
import { eventually } from '../support/eventually.ts';
import { freePorts } from '../support/ports.ts';

const root = resolve(import.meta.dirname, '..', '..');
let server: KubeApiServer;
let cluster: TestCluster;
let kubeconfig: string;
const children: ChildProcess[] = [];
const base = () => `${server.url}/apis/hookgate.dev/v1alpha1/namespaces/default`;

function startOperator(port: number): ChildProcess {
  const child = spawn(
    process.execPath,
    [join(root, 'roles/cli.ts'), 'operator', '--port', String(port)],
    {
      env: {
        ...process.env,
        KUBECONFIG: kubeconfig,
        HOOKGATE_LEASE_NAMESPACE: 'default',
        HOOKGATE_BASE_URL: 'https://hooks.test',
      },
      stdio: 'ignore',
    },
  );
  children.push(child);
  return child;
}

const readiness = async (port: number) =>
  ((await (await fetch(`http://127.0.0.1:${port}/readyz`)).json()) as { status: string }).status;

/** The trigger's Ready condition as `<status>/<reason>`. */
async function ready(name: string): Promise<string | undefined> {
  const res = await fetch(`${base()}/webhooktriggers/${name}`);
  const t = (await res.json()) as {
    status?: { conditions?: { type: string; status: string; reason: string }[] };
  };
  const c = t.status?.conditions?.find((c) => c.type === 'Ready');
  return c && `${c.status}/${c.reason}`;
}

async function createTrigger(name: string) {
  const res = await fetch(`${base()}/webhooktriggers`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      apiVersion: 'hookgate.dev/v1alpha1',
      kind: 'WebhookTrigger',
      metadata: { name },
      spec: {
        workflowRef: { name: 'orders' },
        pathSegment: name,
        response: { mode: 'immediateAck' },
      },
    }),
  });
  expect(res.status).toBe(201);
}

describe('hookgate operator processes', () => {
  let ports: readonly [number, number] = [0, 0];
  beforeAll(async () => {
    ports = (await freePorts(2)) as [number, number];
    cluster = await startTestCluster({ crds: true });
    ({ server, kubeconfig } = cluster);
    await fetch(`${base()}/workflows`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        apiVersion: 'hookgate.dev/v1alpha1',
        kind: 'Workflow',
        metadata: { name: 'orders' },
        spec: { application: 'shop', nodes: [{ id: 'a', type: 'transform', expression: '$' }] },
      }),
    });
  });
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await cluster.close();
  });

  it('exactly one of two replicas leads and reconciles', async () => {
    startOperator(ports[0]);
    await eventually(async () => expect(await readiness(ports[0])).toBe('leading'), 15_000, 100);
    startOperator(ports[1]);
    await eventually(async () => expect(await readiness(ports[1])).toBe('standby'), 15_000, 100);
    await createTrigger('first');
    await eventually(async () => expect(await ready('first')).toBe('False/NoGateway'), 10_000, 100);
    const lease = (await (
      await fetch(
        `${server.url}/apis/coordination.k8s.io/v1/namespaces/default/leases/hookgate-operator`,
      )
    ).json()) as {
      spec: { holderIdentity: string };
    };
    expect(lease.spec.holderIdentity).toBeTruthy();
    expect(await readiness(ports[1])).toBe('standby');
  });

  it('SIGTERM on the leader drains, releases the Lease, exits 0; the standby takes over at once', async () => {
    const leader = children[0] as ChildProcess;
    const exited = new Promise<number | null>((r) => leader.once('exit', (code) => r(code)));
    const started = Date.now();
    leader.kill('SIGTERM');
    expect(await exited).toBe(0);
    await eventually(async () => expect(await readiness(ports[1])).toBe('leading'), 15_000, 100);
    // A released Lease is taken on the next retry, well before a 15 s lease would expire.
    expect(Date.now() - started).toBeLessThan(10_000);
    await createTrigger('second');
    await eventually(
      async () => expect(await ready('second')).toBe('False/NoGateway'),
      10_000,
      100,
    );
  });
});
