// The distributed shape: one `hookgate operator` and two `hookgate gateway` processes
// sharing a real redis-server, resources from the Kubernetes-compatible API server.
// The operator writes routes to Redis; both gateways serve them; a rate limit is
// counted across both; a deleted trigger disappears from both.
import { spawn, type ChildProcess } from 'node:child_process';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeApiServer } from '../kube-apiserver/index.ts';
import { startTestCluster, type TestCluster } from '../support/test-cluster.ts';
import { eventually } from '../support/eventually.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';

const root = resolve(import.meta.dirname, '..', '..');
const PATH = '/webhook/default-production-orders/ingest';

describe.skipIf(!redisAvailable())('operator + two gateways over Redis', () => {
  let api: KubeApiServer;
  let redis: RedisServer;
  let cluster: TestCluster;
  const children: ChildProcess[] = [];
  const ports: number[] = [];
  let metricsPort = 0;
  const base = () => `${api.url}/apis/hookgate.dev/v1alpha1/namespaces/default`;

  function start(
    role: 'operator' | 'gateway',
    port: number,
    kubeconfig: string,
    extra: Record<string, string> = {},
  ) {
    const child = spawn(
      process.execPath,
      [join(root, 'runtime/cli.ts'), role, '--port', String(port)],
      {
        env: {
          ...process.env,
          KUBECONFIG: kubeconfig,
          REDIS_URL: redis.url,
          LOG_LEVEL: 'warn',
          HOOKGATE_BASE_URL: 'https://hooks.test',
          ...extra,
        },
        stdio: 'ignore',
      },
    );
    children.push(child);
  }
  const post = (path: string, body: object) =>
    fetch(`${base()}/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  beforeAll(async () => {
    cluster = await startTestCluster({ crds: true });
    api = cluster.server;
    const kubeconfig = cluster.kubeconfig;
    redis = await startRedis();
    const port = 31_000 + Math.floor(Math.random() * 3000);
    ports.push(port, port + 1, port + 2);
    start('operator', port, kubeconfig);
    start('gateway', port + 1, kubeconfig, { METRICS_PORT: String(port + 10) });
    metricsPort = port + 10;
    start('gateway', port + 2, kubeconfig);
    for (const p of ports) {
      await eventually(
        async () => expect((await fetch(`http://127.0.0.1:${p}/healthz`)).status).toBe(200),
        20_000,
        100,
      );
    }
  });
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await cluster?.close();
    await redis?.stop();
  });

  it('both gateways serve the trigger the operator deployed, and share its rate limit', async () => {
    await post('workflows', {
      apiVersion: 'hookgate.dev/v1alpha1',
      kind: 'Workflow',
      metadata: { name: 'orders' },
      spec: {
        application: 'shop',
        environment: 'production',
        nodes: [{ id: 'a', type: 'transform', expression: '$' }],
      },
    });
    await post('webhooktriggers', {
      apiVersion: 'hookgate.dev/v1alpha1',
      kind: 'WebhookTrigger',
      metadata: { name: 'ingest' },
      spec: {
        workflowRef: { name: 'orders' },
        pathSegment: 'ingest',
        rateLimit: { requestsPerMinute: 10 },
        response: { mode: 'immediateAck' },
      },
    });
    const gateways = ports.slice(1);
    await eventually(
      async () => {
        for (const p of gateways) {
          const res = await fetch(`http://127.0.0.1:${p}${PATH}`, { method: 'OPTIONS' });
          expect(res.status).toBe(204);
        }
      },
      20_000,
      100,
    );
    const results = await Promise.all(
      Array.from({ length: 30 }, (_v, i) =>
        fetch(`http://127.0.0.1:${gateways[i % 2]}${PATH}`, { method: 'POST' }),
      ),
    );
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 202)).toHaveLength(10);
    expect(statuses.filter((s) => s === 429)).toHaveLength(20);
    // The first gateway also serves its metrics on METRICS_PORT, as the chart expects.
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    const served =
      /http_server_request_duration_seconds_count\{[^}]*http_response_status_code="202"[^}]*\} (\d+)/.exec(
        metrics,
      );
    expect(Number(served?.[1])).toBeGreaterThan(0);
    expect((await fetch(`http://127.0.0.1:${metricsPort}/readyz`)).status).toBe(200);
  });

  it('an Idempotency-Key sent to one gateway and retried on the other runs once', async () => {
    await post('webhooktriggers', {
      apiVersion: 'hookgate.dev/v1alpha1',
      kind: 'WebhookTrigger',
      metadata: { name: 'once' },
      spec: {
        workflowRef: { name: 'orders' },
        pathSegment: 'once',
        response: { mode: 'immediateAck' },
      },
    });
    const [g1, g2] = ports.slice(1) as [number, number];
    const path = '/webhook/default-production-orders/once';
    const send = (port: number) =>
      fetch(`http://127.0.0.1:${port}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': 'order-77' },
        body: '{"orderId":77}',
      });
    await eventually(
      async () =>
        expect((await fetch(`http://127.0.0.1:${g2}${path}`, { method: 'OPTIONS' })).status).toBe(
          204,
        ),
      20_000,
      100,
    );
    const first = await send(g1);
    expect(first.status).toBe(202);
    const { executionId } = (await first.json()) as { executionId: string };
    const retried = await send(g2);
    expect(retried.status).toBe(202);
    expect(retried.headers.get('idempotent-replayed')).toBe('true');
    expect(((await retried.json()) as { executionId: string }).executionId).toBe(executionId);
  });

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
