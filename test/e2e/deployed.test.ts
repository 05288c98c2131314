// "Deployed" means served, with real processes: a `hookgate operator` and `hookgate
// gateway` replicas on a real redis-server, resources from the Kubernetes-compatible
// API server, and a real kubectl. With no gateway a trigger stays NoGateway and
// `kubectl wait --for=condition=Ready` waits; it returns once a gateway serves the
// route, and a request sent at that moment is served. An edit is GatewayPending
// until the gateways serve the new generation; a gateway that dies counts until its
// report expires; Redis stopped under the operator shows as StoreError, and
// everything recovers when it returns, with no restart.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, sleep } from '../support/eventually.ts';
import { kubeToolEnv, kubeToolsOrSkip } from '../support/kube-tools.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';
import { startTestCluster, type TestCluster } from '../support/test-cluster.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { freePortRun } from '../support/ports.ts';

/** Consecutive ports free at load time for the processes this suite starts. */
const BASE_PORT = await freePortRun(8);

const root = resolve(import.meta.dirname, '..', '..');
const tools = await kubeToolsOrSkip();
const PATH = '/webhook/default_production_orders/a';
/** A gateway's report counts this long unless refreshed (every third of it). */
const TTL_MS = 4_000;

interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
  observedGeneration: number;
}

describe.skipIf(!tools || !redisAvailable())('Deployed means served (real processes)', () => {
  let cluster: TestCluster;
  let redis: RedisServer;
  const children: ChildProcess[] = [];
  const port = BASE_PORT;
  const gatewayPorts = [port + 1, port + 2];
  const base = () => `${cluster.server.url}/apis/hookgate.dev/v1alpha1/namespaces/default`;

  function start(role: 'operator' | 'gateway', listen: number): ChildProcess {
    const child = spawn(
      process.execPath,
      [join(root, 'roles/cli.ts'), role, '--port', String(listen)],
      {
        env: {
          ...process.env,
          ADMIN_PORT: '0',
          HOOKGATE_ADMIN_AUTH: 'none',
          KUBECONFIG: cluster.kubeconfig,
          REDIS_URL: redis.url,
          LOG_LEVEL: 'warn',
          HOOKGATE_BASE_URL: 'https://hooks.test',
          HOOKGATE_GATEWAY_TTL_MS: String(TTL_MS),
        },
        stdio: 'ignore',
      },
    );
    children.push(child);
    return child;
  }
  const healthy = (p: number) =>
    eventually(
      async () => expect((await fetch(`http://127.0.0.1:${p}/healthz`)).status).toBe(200),
      20_000,
      100,
    );
  // Ready: a gateway listens (healthy) before it has loaded the routes, and a Service
  // sends it traffic only once /readyz says so (a fresh-clone CI run sent one too
  // early: 404).
  const ready = (p: number) =>
    eventually(
      async () => expect((await fetch(`http://127.0.0.1:${p}/readyz`)).status).toBe(200),
      20_000,
      100,
    );
  const post = (path: string, body: object) =>
    fetch(`${base()}/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const patchTrigger = async (spec: object) => {
    const res = await fetch(`${base()}/webhooktriggers/a`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ spec }),
    });
    expect(res.status).toBe(200);
    return ((await res.json()) as { metadata: { generation: number } }).metadata.generation;
  };
  const conditions = async (kind = 'webhooktriggers', name = 'a') => {
    const res = await fetch(`${base()}/${kind}/${name}`);
    const obj = (await res.json()) as { status?: { conditions?: Condition[] } };
    return Object.fromEntries((obj.status?.conditions ?? []).map((c) => [c.type, c]));
  };
  const kubectl = (...args: string[]) =>
    new Promise<{ code: number; stderr: string }>((done) => {
      execFile(
        tools?.kubectl ?? 'kubectl-missing',
        args,
        { env: kubeToolEnv(cluster.dir, cluster.kubeconfig), timeout: 90_000 },
        (err, _stdout, stderr) =>
          done({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stderr }),
      );
    });
  const send = (p: number) => fetch(`http://127.0.0.1:${p}${PATH}`, { method: 'POST' });

  beforeAll(async () => {
    cluster = await startTestCluster({ crds: true });
    redis = await startRedis();
    start('operator', port);
    await healthy(port);
  });
  afterAll(async () => {
    for (const c of children) {
      c.kill('SIGCONT');
      c.kill('SIGKILL');
    }
    await cluster?.close();
    await redis?.stop();
  });

  it('with no gateway a new trigger stays Ready=False/NoGateway, and kubectl wait waits; a gateway that starts serves it, and kubectl wait returns only then', async () => {
    await post('workflows', workflow('orders'));
    await post('webhooktriggers', trigger('a', { pathSegment: 'a' }));
    await eventually(
      async () => {
        const c = await conditions();
        expect(c.Ready).toMatchObject({ status: 'False', reason: 'NoGateway' });
        expect(c.Deployed?.message).toContain('No gateway is running');
        expect(c.Valid?.status).toBe('True');
      },
      15_000,
      100,
    );
    let waited: { code: number; stderr: string } | undefined;
    const waiting = kubectl('wait', '--for=condition=Ready', 'webhooktrigger/a', '--timeout=60s');
    void waiting.then((r) => (waited = r));
    await sleep(2_000);
    expect(waited).toBeUndefined();
    expect((await conditions()).Ready?.reason).toBe('NoGateway');

    start('gateway', gatewayPorts[0] as number);
    const result = await waiting;
    expect(result.code, result.stderr).toBe(0);
    // kubectl wait has returned: a request sent now is served.
    expect((await send(gatewayPorts[0] as number)).status).toBe(202);
    expect((await conditions()).Deployed).toMatchObject({ status: 'True', reason: 'Deployed' });
  }, 60_000);

  it('an edit is Deployed=False/GatewayPending until the gateway serves the new generation', async () => {
    const gateway = children[1] as ChildProcess;
    gateway.kill('SIGSTOP'); // it cannot pick the change up until it is thawed
    const generation = await patchTrigger({ methods: ['POST', 'PUT'] });
    try {
      await eventually(
        async () => {
          const c = await conditions();
          expect(c.Deployed).toMatchObject({
            status: 'False',
            reason: 'GatewayPending',
            observedGeneration: generation,
          });
          expect(c.Deployed?.message).toContain(`generation ${generation} of ${PATH}`);
          expect(c.Deployed?.message).toContain('served by 0 of 1 gateways');
          expect(c.Ready).toMatchObject({ status: 'False', reason: 'GatewayPending' });
        },
        TTL_MS / 2,
        50,
      );
    } finally {
      gateway.kill('SIGCONT');
    }
    await eventually(
      async () =>
        expect((await conditions()).Ready).toMatchObject({
          status: 'True',
          observedGeneration: generation,
        }),
      15_000,
      100,
    );
    const put = await fetch(`http://127.0.0.1:${gatewayPorts[0]}${PATH}`, { method: 'PUT' });
    expect(put.status).toBe(202);
  }, 30_000);

  it('a gateway that dies counts until its report expires, then no longer', async () => {
    const second = start('gateway', gatewayPorts[1] as number);
    await ready(gatewayPorts[1] as number);
    expect((await send(gatewayPorts[1] as number)).status).toBe(202);
    second.kill('SIGKILL');
    const generation = await patchTrigger({ methods: ['POST'] });
    await eventually(
      async () => {
        const c = await conditions();
        expect(c.Deployed).toMatchObject({
          reason: 'GatewayPending',
          observedGeneration: generation,
        });
        expect(c.Deployed?.message).toMatch(/served by [01] of 2 gateways/);
      },
      TTL_MS / 2,
      50,
    );
    // Its report expires (TTL_MS), the operator notices (polling) and looks again.
    await eventually(
      async () =>
        expect((await conditions()).Ready).toMatchObject({
          status: 'True',
          observedGeneration: generation,
        }),
      TTL_MS + 10_000,
      100,
    );
  }, 30_000);

  it('Redis stopped under the running operator: StoreError; it recovers when Redis returns, with no restart', async () => {
    await redis.stop();
    await patchTrigger({ methods: ['POST', 'PATCH'] });
    await eventually(
      async () => {
        const c = await conditions();
        expect(c.Ready).toMatchObject({ status: 'False', reason: 'StoreError' });
        expect(c.Ready?.message).toMatch(/^Cannot (read the workflow registry|deploy the route): /);
      },
      45_000,
      250,
    );
    redis = await startRedis({ port: redis.port }); // empty: routes and reports are gone too
    await eventually(
      async () => {
        expect((await conditions()).Ready?.status).toBe('True');
        expect((await conditions('workflows', 'orders')).Ready?.status).toBe('True');
      },
      45_000,
      250,
    );
    // The gateway says Redis is back (its breaker closed: it probes every second) and
    // serves the new method. Ready on the resource can come a moment before that (a
    // fresh-clone CI run saw one 503 in between). The gateway stayed ready throughout
    // (ADR 0030): its /readyz body says what Redis does.
    const port = gatewayPorts[0] as number;
    await eventually(
      async () => {
        const res = await fetch(`http://127.0.0.1:${port}/readyz`);
        expect(res.status).toBe(200);
        expect(((await res.json()) as { status: string }).status).toBe('ready');
      },
      10_000,
      100,
    );
    const patched = await fetch(`http://127.0.0.1:${port}${PATH}`, { method: 'PATCH' });
    expect(patched.status).toBe(202);
  }, 120_000);
});
