// Redis killed under load (issue 17): an operator, a gateway and a worker process over a
// real redis-server with an append-only file. While Redis is gone the gateway answers
// webhooks 503 store-unavailable with Retry-After within its command timeout (never a
// 500, never a request held until Redis returns), reports not-ready while staying
// live, and its read API answers 503 problem documents; once Redis is back it turns
// ready again within seconds, and every execution it answered 202 for finishes, once,
// although the worker running them was also killed (SIGKILL, with runs in flight when
// Redis went) and a new one started after it (issue 14: nothing acknowledged is lost).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisExecutionStore } from '../../runtime/engine/execution-store-redis.ts';
import { eventually, sleep } from '../support/eventually.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { freePort } from '../support/prometheus.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';
import { startTestCluster, type TestCluster } from '../support/test-cluster.ts';

const root = resolve(import.meta.dirname, '..', '..');
const PATH = '/webhook/default_production_orders/outage';
const LIMITED = '/webhook/default_production_orders/limited-';
/** The configured command timeout: every answer during the outage must come well within 5 s. */
const COMMAND_TIMEOUT_MS = 500;
const ANSWER_BOUND_MS = 5_000;

interface Shot {
  sentAt: number;
  ms: number;
  status?: number;
  executionId?: string;
  problemType?: string;
  retryAfter?: string | null;
  error?: string;
}

describe.skipIf(!redisAvailable())('Redis killed under load', () => {
  let cluster: TestCluster;
  let redis: RedisServer;
  let dataDir: string;
  const children: ChildProcess[] = [];
  const ports = { operator: 0, gateway: 0, admin: 0, metrics: 0, worker: 0, inline: 0 };

  function start(role: string, port: number, extra: Record<string, string> = {}): ChildProcess {
    const child = spawn(
      process.execPath,
      [join(root, 'roles/cli.ts'), role, '--port', String(port)],
      {
        env: {
          ...process.env,
          KUBECONFIG: cluster.kubeconfig,
          REDIS_URL: redis.url,
          LOG_LEVEL: 'warn',
          HOOKGATE_BASE_URL: 'https://hooks.test',
          HOOKGATE_REDIS_COMMAND_TIMEOUT_MS: String(COMMAND_TIMEOUT_MS),
          HOOKGATE_REDIS_BREAKER_OPEN_MS: '500',
          ...extra,
        },
        stdio: 'ignore',
      },
    );
    children.push(child);
    return child;
  }
  // Claims renewed every 700 ms; a job left unacknowledged is run again after 2 s.
  const startWorker = () =>
    start('worker', ports.worker, { HOOKGATE_WORKER_CLAIM_IDLE_MS: '2000' });
  let worker: ChildProcess;
  const status = async (url: string) => {
    try {
      return (await fetch(url)).status;
    } catch {
      return 0;
    }
  };
  const ready = (port: number) => status(`http://127.0.0.1:${port}/readyz`);
  /** The gateway's /readyz: its status code and what it says of Redis. */
  const readyBody = async (port: number) => {
    const res = await fetch(`http://127.0.0.1:${port}/readyz`);
    return { code: res.status, status: ((await res.json()) as { status: string }).status };
  };
  const live = (port: number) => status(`http://127.0.0.1:${port}/healthz`);

  beforeAll(async () => {
    cluster = await startTestCluster({ crds: true });
    dataDir = await mkdtemp(join(tmpdir(), 'hookgate-aof-'));
    redis = await startRedis({ appendOnlyDir: dataDir });
    for (const key of Object.keys(ports) as (keyof typeof ports)[]) ports[key] = await freePort();
    start('operator', ports.operator);
    start('gateway', ports.gateway, {
      ADMIN_PORT: String(ports.admin),
      HOOKGATE_ADMIN_AUTH: 'none',
      METRICS_PORT: String(ports.metrics),
    });
    // A gateway running its executions itself: only the rate limit needs Redis there.
    start('gateway', ports.inline, {
      ADMIN_PORT: String(await freePort()),
      HOOKGATE_ADMIN_AUTH: 'none',
      HOOKGATE_EXECUTIONS: 'inline',
    });
    worker = startWorker();
    const api = `${cluster.server.url}/apis/hookgate.dev/v1alpha1/namespaces/default`;
    const create = (kind: string, body: object) =>
      fetch(`${api}/${kind}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    // A pause in every run, so that the worker has executions in flight when it is killed.
    await create(
      'workflows',
      workflow('orders', {
        nodes: [
          { id: 'pause', type: 'delay', duration: '200ms' },
          { id: 'echo', type: 'transform', expression: '$' },
        ],
      }),
    );
    await create('webhooktriggers', trigger('outage', { pathSegment: 'outage' }));
    for (const failureMode of ['open', 'closed'])
      await create(
        'webhooktriggers',
        trigger(`limited-${failureMode}`, {
          pathSegment: `limited-${failureMode}`,
          rateLimit: { requestsPerMinute: 100_000, failureMode },
        }),
      );
    for (const failureMode of ['open', 'closed'])
      await eventually(
        async () =>
          expect(
            (
              await fetch(`http://127.0.0.1:${ports.inline}${LIMITED}${failureMode}`, {
                method: 'OPTIONS',
              })
            ).status,
          ).toBe(405), // served (404 before); OPTIONS is not one of its methods, CORS is off
        45_000,
        100,
      );
    await eventually(
      async () =>
        expect(
          (await fetch(`http://127.0.0.1:${ports.gateway}${PATH}`, { method: 'OPTIONS' })).status,
        ).toBe(405), // served (404 before); OPTIONS is not one of its methods, CORS is off
      45_000,
      100,
    );
    for (const port of [ports.metrics, ports.worker])
      await eventually(async () => expect(await ready(port)).toBe(200), 45_000, 100);
  }, 120_000);

  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await redis?.stop();
    await cluster?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('503 within the timeout, not ready while down, ready after, and nothing accepted lost', async () => {
    const shots: Shot[] = [];
    let loading = true;
    let n = 0;
    const shoot = async (): Promise<void> => {
      const sentAt = Date.now();
      const shot: Shot = { sentAt, ms: 0 };
      try {
        const res = await fetch(`http://127.0.0.1:${ports.gateway}${PATH}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ n: n++ }),
          signal: AbortSignal.timeout(30_000),
        });
        shot.status = res.status;
        const body = (await res.json()) as { executionId?: string; type?: string };
        if (res.status === 202) shot.executionId = body.executionId;
        else {
          shot.problemType = body.type;
          shot.retryAfter = res.headers.get('retry-after');
        }
      } catch (error) {
        shot.error = (error as Error).message;
      }
      shot.ms = Date.now() - sentAt;
      shots.push(shot);
    };
    const loop = async () => {
      while (loading) {
        await shoot();
        // Paced, so the outage is measured rather than the machine's saturation.
        await sleep(10);
      }
    };
    const loops = Array.from({ length: 6 }, loop);

    await sleep(1_500);
    const running = await fetch(`http://127.0.0.1:${ports.admin}/api/executions?status=running`);
    const inFlight = ((await running.json()) as { items: unknown[] }).items.length;
    const killedAt = Date.now();
    await redis.kill();
    // The gateway stays in the Service (its 503s say store-unavailable, with
    // Retry-After); its /readyz says what Redis does.
    await eventually(
      async () =>
        expect(await readyBody(ports.metrics)).toEqual({
          code: 200,
          status: expect.stringMatching(/^ready; redis /) as unknown,
        }),
      10_000,
      50,
    );
    const redisDownSaidAfterMs = Date.now() - killedAt;
    await eventually(async () => expect(await ready(ports.worker)).toBe(503), 10_000, 50);
    // Down for a while under load: liveness stays up, the read API answers 503.
    await sleep(2_000);
    expect(await live(ports.metrics)).toBe(200);
    expect(await live(ports.worker)).toBe(200);
    // Scrapes still answer (gauges that read Redis keep their last value).
    expect((await fetch(`http://127.0.0.1:${ports.worker}/metrics`)).status).toBe(200);
    // Then the worker dies too, with the runs it had when Redis went unacknowledged.
    worker.kill('SIGKILL');
    await new Promise((r) => worker.once('exit', r));
    // Inline executions need Redis only for the rate limit: failureMode open lets the
    // request through (202, no RateLimit headers), closed refuses it.
    const limited = (mode: string) =>
      fetch(`http://127.0.0.1:${ports.inline}${LIMITED}${mode}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
    const open = await limited('open');
    expect(open.status).toBe(202);
    expect(open.headers.get('ratelimit-limit')).toBeNull();
    const closed = await limited('closed');
    expect(closed.status).toBe(503);
    expect(((await closed.json()) as { type: string }).type).toMatch(/\/rate-limit-unavailable$/);
    // Both are counted: an endpoint running without its limit shows on the dashboards.
    const decisions = await (await fetch(`http://127.0.0.1:${ports.inline}/metrics`)).text();
    for (const decision of ['failed_open', 'failed_closed'])
      expect(
        Number(
          new RegExp(
            `^hookgate_rate_limit_decisions_total\\{decision="${decision}"\\} (\\d+)$`,
            'm',
          ).exec(decisions)?.[1],
        ),
      ).toBeGreaterThanOrEqual(1);
    const read = await fetch(`http://127.0.0.1:${ports.admin}/api/executions?limit=5`);
    expect(read.status).toBe(503);
    expect(read.headers.get('content-type')).toMatch(/application\/problem\+json/);
    expect(((await read.json()) as { type: string }).type).toMatch(/\/store-unavailable$/);
    const scrape = await fetch(`http://127.0.0.1:${ports.metrics}/metrics`);
    expect(scrape.status).toBe(200);
    const metrics = await scrape.text();
    expect(metrics).toMatch(/^hookgate_redis_circuit_state 2$/m);
    const failed = [...metrics.matchAll(/^hookgate_redis_command_failures_total\{[^}]*\} (\d+)/gm)];
    expect(failed.reduce((sum, m) => sum + Number(m[1]), 0)).toBeGreaterThan(0);

    const restartAt = Date.now();
    redis = await startRedis({ port: redis.port, appendOnlyDir: dataDir });
    await eventually(
      async () => expect(await readyBody(ports.metrics)).toEqual({ code: 200, status: 'ready' }),
      30_000,
      50,
    );
    const readyAfterRestartMs = Date.now() - restartAt;
    // A new worker: it claims the killed one's jobs once they have been idle 2 s.
    worker = startWorker();
    await eventually(async () => expect(await ready(ports.worker)).toBe(200), 30_000, 50);
    await sleep(1_000);
    loading = false;
    await Promise.all(loops);

    const during = shots.filter((s) => s.sentAt >= killedAt && s.sentAt < restartAt);
    const accepted = shots.filter((s) => s.status === 202);
    const summary = {
      shots: shots.length,
      accepted: accepted.length,
      during: during.length,
      statusesDuring: count(during.map((s) => String(s.status ?? s.error))),
      slowestDuringMs: Math.max(...during.map((s) => s.ms)),
      slowestOverallMs: Math.max(...shots.map((s) => s.ms)),
      redisDownSaidAfterMs,
      readyAfterRestartMs,
      inFlightWhenRedisKilled: inFlight,
    };
    console.info('redis outage under load:', JSON.stringify(summary));

    // Load on both sides, work in flight when the worker died, refusals during the outage.
    expect(accepted.length).toBeGreaterThan(20);
    expect(inFlight).toBeGreaterThan(0);
    expect(during.filter((s) => s.status === 503).length).toBeGreaterThan(5);
    // Every request answered, within the bound: no hang, no reset, no 500.
    expect(shots.filter((s) => s.error !== undefined)).toEqual([]);
    expect(shots.filter((s) => s.ms >= ANSWER_BOUND_MS)).toEqual([]);
    expect(shots.filter((s) => s.status !== 202 && s.status !== 503)).toEqual([]);
    for (const s of shots.filter((x) => x.status === 503)) {
      expect(s.problemType).toMatch(/\/store-unavailable$/);
      expect(Number(s.retryAfter)).toBeGreaterThanOrEqual(1);
    }

    // Every 202 finishes once: its record succeeded, with exactly one terminal event.
    const client = new Redis(redis.url, { lazyConnect: true });
    await client.connect();
    // What the gateways read: the store over the same Redis.
    const store = new RedisExecutionStore({ redis: client });
    try {
      await eventually(
        async () => {
          const records = await Promise.all(accepted.map((s) => store.get(String(s.executionId))));
          const unfinished = records
            .map((r, i) => ({ id: accepted[i]?.executionId, status: r?.status }))
            .filter((r) => r.status !== 'succeeded');
          expect(unfinished).toEqual([]);
        },
        60_000,
        500,
      );
      for (const shot of accepted) {
        const events = (await store.events(String(shot.executionId), 0)).map((e) => e.type);
        expect({
          id: shot.executionId,
          terminal: events.filter((t) => t === 'completed' || t === 'failed'),
        }).toEqual({
          id: shot.executionId,
          terminal: ['completed'],
        });
      }
    } finally {
      client.disconnect();
    }
  }, 180_000);
});

function count(values: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const v of values) counts[v] = (counts[v] ?? 0) + 1;
  return counts;
}
