// The distributed shape: one `hookgate operator`, two `hookgate gateway` and
// `hookgate worker` processes sharing a real redis-server, resources from the
// Kubernetes-compatible API server. The operator writes routes to Redis; both gateways
// serve them and queue executions that the workers run; a rate limit is counted across
// both; a worker killed mid-run loses nothing; a deleted trigger disappears from both.
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeApiServer } from '../../testing/kube-apiserver/index.ts';
import { startTestCluster, type TestCluster } from '../support/test-cluster.ts';
import { eventually } from '../support/eventually.ts';
import { freePorts } from '../support/ports.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';
import { collect } from '../support/sse.ts';
import { trigger, workflow } from '../support/manifests.ts';

const root = resolve(import.meta.dirname, '..', '..');
/** The gateways' admin listeners take this static token (HOOKGATE_ADMIN_AUTH=token). */
const ADMIN_TOKEN = 'e2e-admin-token-0123456789';
/** Each gateway's admin listener: webhook port -> admin port, all chosen free by the kernel. */
const adminPorts = new Map<number, number>();
const adminPortOf = (gatewayPort: number): number => {
  const port = adminPorts.get(gatewayPort);
  if (port === undefined) throw new Error(`no admin port for gateway ${gatewayPort}`);
  return port;
};
const adminGet = (gatewayPort: number, path: string) =>
  fetch(`http://127.0.0.1:${adminPortOf(gatewayPort)}${path}`, {
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
const PATH = '/webhook/default_production_orders/ingest';

describe.skipIf(!redisAvailable())('operator + two gateways over Redis', () => {
  let api: KubeApiServer;
  let redis: RedisServer;
  let cluster: TestCluster;
  const children: ChildProcess[] = [];
  const ports: number[] = [];
  let metricsPort = 0;
  /** Free ports for the workers the tests start, taken in order. */
  let workerPorts: number[] = [];
  const base = () => `${api.url}/apis/hookgate.dev/v1alpha1/namespaces/default`;

  let kubeconfig = '';
  function start(
    role: 'operator' | 'gateway' | 'worker',
    port: number,
    kubeconfigPath: string,
    extra: Record<string, string> = {},
  ): ChildProcess {
    const child = spawn(
      process.execPath,
      [join(root, 'roles/cli.ts'), role, '--port', String(port)],
      {
        env: {
          ...process.env,
          ...(adminPorts.has(port) ? { ADMIN_PORT: String(adminPortOf(port)) } : {}),
          HOOKGATE_ADMIN_AUTH: 'token',
          HOOKGATE_ADMIN_TOKEN_FILE: join(cluster.dir, 'admin-token'),
          KUBECONFIG: kubeconfigPath,
          REDIS_URL: redis.url,
          LOG_LEVEL: 'warn',
          HOOKGATE_BASE_URL: 'https://hooks.test',
          ...extra,
        },
        stdio: 'ignore',
      },
    );
    children.push(child);
    return child;
  }
  /**
   * Waits until the gateway on `port` serves `path`: OPTIONS answers 405 with Allow (the
   * endpoints serve neither OPTIONS nor CORS) instead of 404.
   */
  const serves = (port: number, path: string) =>
    eventually(
      async () =>
        expect((await fetch(`http://127.0.0.1:${port}${path}`, { method: 'OPTIONS' })).status).toBe(
          405,
        ),
      20_000,
      100,
    );
  const healthy = (port: number) =>
    eventually(
      async () => expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200),
      // Four processes start at once; under a loaded machine one took over 20 s.
      45_000,
      100,
    );
  const post = (path: string, body: object) =>
    fetch(`${base()}/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  beforeAll(async () => {
    cluster = await startTestCluster({ crds: true });
    api = cluster.server;
    kubeconfig = cluster.kubeconfig;
    writeFileSync(join(cluster.dir, 'admin-token'), `${ADMIN_TOKEN}\n`);
    redis = await startRedis();
    // Ports the kernel chose free just now (random ones collide on a loaded CI machine).
    const [operator, g1, g2, admin1, admin2, metrics, ...spare] = await freePorts(9);
    ports.push(operator!, g1!, g2!);
    adminPorts.set(g1!, admin1!).set(g2!, admin2!);
    metricsPort = metrics!;
    workerPorts = spare;
    start('operator', operator!, kubeconfig);
    start('gateway', g1!, kubeconfig, { METRICS_PORT: String(metricsPort) });
    start('gateway', g2!, kubeconfig);
    for (const p of ports) await healthy(p);
  });
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await cluster?.close();
    await redis?.stop();
  });

  it('both gateways serve the trigger the operator deployed, and share its rate limit', async () => {
    await post('workflows', workflow('orders'));
    await post(
      'webhooktriggers',
      trigger('ingest', { pathSegment: 'ingest', rateLimit: { requestsPerMinute: 10 } }),
    );
    const gateways = ports.slice(1);
    for (const p of gateways) await serves(p, PATH);
    const startedAt = Date.now();
    const results = await Promise.all(
      Array.from({ length: 30 }, (_v, i) =>
        fetch(`http://127.0.0.1:${gateways[i % 2]}${PATH}`, { method: 'POST' }),
      ),
    );
    // 10 at once, then one more every 6 s: on a loaded machine the 30 may take that long.
    const refilled = Math.floor((Date.now() - startedAt) / 6_000);
    const statuses = results.map((r) => r.status);
    const accepted = statuses.filter((s) => s === 202).length;
    expect(accepted).toBeGreaterThanOrEqual(10);
    expect(accepted).toBeLessThanOrEqual(10 + refilled);
    expect(statuses.filter((s) => s === 429)).toHaveLength(30 - accepted);
    // The first gateway also serves its metrics on METRICS_PORT, as the chart expects.
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    const served =
      /http_server_request_duration_seconds_count\{[^}]*http_response_status_code="202"[^}]*\} (\d+)/.exec(
        metrics,
      );
    expect(Number(served?.[1])).toBeGreaterThan(0);
    expect((await fetch(`http://127.0.0.1:${metricsPort}/readyz`)).status).toBe(200);
    // ...and only there: its series name endpoints and consumers. The probes stay on
    // the webhook port as well.
    const [g1] = ports.slice(1) as [number];
    const publicScrape = await fetch(`http://127.0.0.1:${g1}/metrics`);
    expect(publicScrape.status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${g1}/readyz`)).status).toBe(200);
  });

  it('an Idempotency-Key sent to one gateway and retried on the other runs once', async () => {
    await post('webhooktriggers', trigger('once', { pathSegment: 'once' }));
    const [g1, g2] = ports.slice(1) as [number, number];
    const path = '/webhook/default_production_orders/once';
    const send = (port: number) =>
      fetch(`http://127.0.0.1:${port}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': 'order-77' },
        body: '{"orderId":77}',
      });
    await serves(g2, path);
    const first = await send(g1);
    expect(first.status).toBe(202);
    const { executionId } = (await first.json()) as { executionId: string };
    const retried = await send(g2);
    expect(retried.status).toBe(202);
    expect(retried.headers.get('idempotent-replayed')).toBe('true');
    expect(((await retried.json()) as { executionId: string }).executionId).toBe(executionId);
  });

  it('a worker runs what a gateway queued; either gateway reads it and waits for it', async () => {
    const worker = start('worker', workerPorts[0]!, kubeconfig);
    await healthy(workerPorts[0]!);
    await post(
      'webhooktriggers',
      trigger('wait', { pathSegment: 'wait', response: { mode: 'waitForCompletion' } }),
    );
    const [g1, g2] = ports.slice(1) as [number, number];
    const waitPath = '/webhook/default_production_orders/wait';
    await serves(g2, waitPath);
    // Immediate ACK on one gateway, the record from the other.
    const acked = await fetch(`http://127.0.0.1:${g1}/webhook/default_production_orders/once`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"orderId":78}',
    });
    expect(acked.status).toBe(202);
    const { executionId, links } = (await acked.json()) as {
      executionId: string;
      links: { self: string; events: string };
    };
    await eventually(async () => {
      const res = await adminGet(g2, `/api/executions/${executionId}`);
      expect(await res.json()).toMatchObject({
        status: 'succeeded',
        output: { body: { orderId: 78 } },
      });
    });
    // The caller's links, minted by g1, work on g2's public port without an admin token.
    const view = await fetch(`http://127.0.0.1:${g2}${links.self}`);
    expect(view.status).toBe(200);
    expect(await view.json()).toMatchObject({ executionId, status: 'succeeded' });
    const frames = await collect(await fetch(`http://127.0.0.1:${g2}${links.events}`));
    expect(frames.at(-1)?.event).toBe('completed');
    const forged = await fetch(`http://127.0.0.1:${g2}/webhook-executions/${executionId}`);
    expect(forged.status).toBe(404);
    // The record is on the admin listener only, and only with the token: the public
    // port has no /api at all (docs/security.md A2, A3).
    const publicApi = await fetch(`http://127.0.0.1:${g2}/api/executions/${executionId}`);
    expect(publicApi.status).toBe(404);
    const anonymous = await fetch(
      `http://127.0.0.1:${adminPortOf(g2)}/api/executions/${executionId}`,
    );
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toMatch(/^Bearer/);
    // Wait for Completion: the gateway answers with the output the worker produced.
    const waited = await fetch(`http://127.0.0.1:${g2}${waitPath}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"orderId":79}',
    });
    expect(waited.status).toBe(200);
    expect(await waited.json()).toMatchObject({ body: { orderId: 79 } });
    worker.kill('SIGTERM');
    await new Promise((resolve) => worker.once('exit', resolve));
  }, 60_000); // starts a process and waits on two runs: slow on a loaded machine

  it('a worker killed mid-run loses nothing: another runs the execution again, same id (G14)', async () => {
    await post('workflows', {
      apiVersion: 'hookgate.dev/v1alpha1',
      kind: 'Workflow',
      metadata: { name: 'slow' },
      spec: {
        application: 'shop',
        environment: 'production',
        nodes: [
          { id: 'pause', type: 'delay', duration: '1500ms' },
          { id: 'done', type: 'transform', expression: '{ "done": body.n }' },
        ],
      },
    });
    await post(
      'webhooktriggers',
      trigger('slow', { workflowRef: { name: 'slow' }, pathSegment: 'slow' }),
    );
    const g1 = ports[1] as number;
    const path = '/webhook/default_production_slow/slow';
    const claim = { HOOKGATE_WORKER_CLAIM_IDLE_MS: '1000' };
    const doomed = start('worker', workerPorts[1]!, kubeconfig, claim);
    await healthy(workerPorts[1]!);
    await serves(g1, path);
    const res = await fetch(`http://127.0.0.1:${g1}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"n":7}',
    });
    expect(res.status).toBe(202);
    const { executionId, links } = (await res.json()) as {
      executionId: string;
      links: { self: string };
    };
    const record = async () =>
      (await (await adminGet(g1, `/api/executions/${executionId}`)).json()) as {
        status: string;
        output?: unknown;
      };
    await eventually(async () => expect((await record()).status).toBe('running'), 10_000, 20);
    doomed.kill('SIGKILL');
    start('worker', workerPorts[2]!, kubeconfig, claim);
    await eventually(
      async () =>
        expect(await record()).toMatchObject({ status: 'succeeded', output: { done: 7 } }),
      20_000,
      100,
    );
    // One logical execution: one record for the trigger, whose events show the second run.
    const list = (await (await adminGet(g1, '/api/executions?trigger=default/slow')).json()) as {
      items: { id: string }[];
    };
    expect(list.items.map((e) => e.id)).toEqual([executionId]);
    // The caller's link survives the second run (the worker keeps the digest).
    const view = await fetch(`http://127.0.0.1:${g1}${links.self}`);
    expect(await view.json()).toMatchObject({ status: 'succeeded', output: { done: 7 } });
  }, 60_000); // two processes and a claim timeout

  it('a deleted trigger disappears from both gateways', async () => {
    const res = await fetch(`${base()}/webhooktriggers/ingest`, { method: 'DELETE' });
    expect(res.status).toBe(200);
    await eventually(
      async () => {
        for (const p of ports.slice(1))
          expect((await fetch(`http://127.0.0.1:${p}${PATH}`, { method: 'POST' })).status).toBe(
            404,
          );
      },
      20_000,
      100,
    );
    await eventually(
      async () => expect((await fetch(`${base()}/webhooktriggers/ingest`)).status).toBe(404),
      20_000,
      100,
    );
  });
});
