// Backpressure that tells the truth (issue 14, item 6), with real processes: two gateway
// processes in queue mode share a bound of HOOKGATE_MAX_QUEUED jobs while no worker
// runs. A burst at both fills the queue to the bound and never past it; every request
// over it gets 503 engine-overloaded (problem+json) with Retry-After; /metrics shows the
// depth at the bound and the oldest job's age growing. A worker process then drains the
// queue, its own /metrics and the gateways' show it empty, and new work is accepted. A
// real Prometheus scrapes all three and answers the queries KEDA and the alerts use.
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { QUEUE } from '../../runtime/engine/queued-engine.ts';
import { eventually, sleep } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { freePortRun } from '../support/ports.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';
import { prometheusMissing, startPrometheus } from '../support/prometheus.ts';

const root = resolve(import.meta.dirname, '..', '..');
const PATH = '/webhook/default_production_orders/ingest';
const BOUND = 8;
const BURST = 48;

const children: ChildProcess[] = [];
const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const child of children) {
    if (child.exitCode !== null) continue;
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }
  for (const cleanup of cleanups.reverse()) await cleanup();
});

function role(args: string[], env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, ['roles/cli.ts', ...args], {
    cwd: root,
    env: { ...process.env, LOG_LEVEL: 'warn', HOOKGATE_ADMIN_AUTH: 'none', ...env },
    stdio: 'ignore',
  });
  children.push(child);
  return child;
}

/** One gauge's value in a /metrics text (undefined: not there). */
async function gauge(base: string, name: string): Promise<number | undefined> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return line ? Number(line[1]) : undefined;
}

/** One number from a Prometheus instant query (undefined: no sample). */
async function instant(prometheus: string, query: string): Promise<number | undefined> {
  const res = await fetch(`${prometheus}/api/v1/query?query=${encodeURIComponent(query)}`);
  const body = (await res.json()) as { data: { result: { value: [number, string] }[] } };
  const [first] = body.data.result;
  return first ? Number(first.value[1]) : undefined;
}

async function post(base: string, i: number) {
  const res = await fetch(`${base}${PATH}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ i }),
  });
  return {
    status: res.status,
    type: res.headers.get('content-type'),
    retryAfter: res.headers.get('retry-after'),
    body: (await res.json()) as { type?: string },
  };
}

describe.skipIf(!redisAvailable())('backpressure (gateway and worker processes)', () => {
  it('two gateways fill the queue to its bound and no further, refuse with 503 and Retry-After, report depth and age; a worker drains it', async () => {
    const server: RedisServer = await startRedis();
    cleanups.push(() => server.stop());
    const redis = new Redis(server.url);
    cleanups.push(() => redis.disconnect());
    // The routes come from a dev runtime over the same Redis (what an operator writes);
    // its engine is in-process, so nothing but the worker below takes jobs.
    const control: TestRuntime = await startRuntime({ redis: new Redis(server.url) });
    cleanups.push(() => control.stop());
    await control.apply(
      'orders.yaml',
      [workflow('orders'), trigger('ingest', { pathSegment: 'ingest' })],
      ['ingest'],
    );
    const port = await freePortRun(6);
    const env = { REDIS_URL: server.url, HOOKGATE_MAX_QUEUED: String(BOUND) };
    const gateways = [0, 2].map((k) => {
      role(['gateway', '--port', String(port + k), '--admin-port', String(port + k + 1)], env);
      return `http://127.0.0.1:${port + k}`;
    });
    for (const base of gateways) {
      await eventually(
        async () => expect((await fetch(`${base}${PATH}`, { method: 'OPTIONS' })).status).toBe(405),
        45_000,
        100,
      );
    }

    // What KEDA (worker.autoscaling) and the alerts query: a real Prometheus scraping
    // both gateways and the worker (down until it starts).
    const missing = prometheusMissing();
    if (missing && process.env.CI === 'true') throw new Error(missing);
    const prometheus = missing
      ? undefined
      : await startPrometheus([port, port + 2, port + 4].map((p) => `127.0.0.1:${p}`));
    if (prometheus) cleanups.push(() => prometheus.stop());
    else console.warn(`skipped the Prometheus queries: ${missing}`);

    // The burst: both gateways at once, with no worker running.
    const answers = await Promise.all(
      Array.from({ length: BURST }, (_v, i) => post(gateways[i % 2] as string, i)),
    );
    const accepted = answers.filter((a) => a.status === 202);
    const refused = answers.filter((a) => a.status === 503);
    expect(accepted).toHaveLength(BOUND);
    expect(refused).toHaveLength(BURST - BOUND);
    for (const r of refused) {
      expect(r.type).toMatch(/^application\/problem\+json/);
      expect(r.body.type).toBe('https://hookgate.dev/problems/engine-overloaded');
      // Nothing drains: the longest advice.
      expect(r.retryAfter).toBe('60');
    }
    expect(await redis.xlen(QUEUE.stream)).toBe(BOUND);
    // Refused before Redis now (each gateway has read the full queue), still the bound.
    const late = await post(gateways[1] as string, BURST);
    expect([late.status, late.retryAfter]).toEqual([503, '60']);
    expect(await redis.xlen(QUEUE.stream)).toBe(BOUND);

    // Both gateways report the depth at the bound and an age that grows.
    const ages: number[] = [];
    for (const base of gateways) {
      await eventually(async () => {
        expect(await gauge(base, 'hookgate_queue_depth')).toBe(BOUND);
        expect(await gauge(base, 'hookgate_queue_oldest_age_seconds')).toBeGreaterThan(0);
      }, 20_000);
      ages.push((await gauge(base, 'hookgate_queue_oldest_age_seconds')) as number);
    }
    await sleep(2_500);
    for (const [k, base] of gateways.entries()) {
      await eventually(async () =>
        expect(await gauge(base, 'hookgate_queue_oldest_age_seconds')).toBeGreaterThan(
          (ages[k] as number) + 1,
        ),
      );
    }

    if (prometheus) {
      // Every replica reports the whole queue: max is the depth, a sum would double it.
      await eventually(async () => {
        expect(await instant(prometheus.url, 'max(hookgate_queue_depth)')).toBe(BOUND);
        expect(await instant(prometheus.url, 'sum(hookgate_queue_depth)')).toBe(2 * BOUND);
        expect(
          await instant(prometheus.url, 'max(hookgate_queue_oldest_age_seconds)'),
        ).toBeGreaterThan(1);
      }, 20_000);
    }

    // A worker drains the queue; its /metrics reads the queue at scrape time.
    const workerBase = `http://127.0.0.1:${port + 4}`;
    role(['worker', '--port', String(port + 4)], env);
    await eventually(
      async () => {
        expect(await gauge(workerBase, 'hookgate_queue_depth')).toBe(0);
        expect(await gauge(workerBase, 'hookgate_queue_oldest_age_seconds')).toBe(0);
      },
      45_000,
      200,
    );
    for (const base of gateways) {
      await eventually(async () => {
        expect(await gauge(base, 'hookgate_queue_depth')).toBe(0);
        expect(await gauge(base, 'hookgate_queue_oldest_age_seconds')).toBe(0);
      }, 20_000);
      expect((await post(base, 0)).status).toBe(202);
    }
    if (prometheus) {
      // The worker is scraped too now, and every replica says the queue is empty.
      await eventually(async () => {
        expect(await instant(prometheus.url, 'count(hookgate_queue_depth)')).toBe(3);
        expect(await instant(prometheus.url, 'max(hookgate_queue_depth)')).toBe(0);
        expect(await instant(prometheus.url, 'max(hookgate_queue_oldest_age_seconds)')).toBe(0);
      }, 20_000);
    }
    await eventually(async () => {
      const res = await fetch(`http://127.0.0.1:${port + 1}/api/executions?status=succeeded`);
      const { items } = (await res.json()) as { items: unknown[] };
      expect(items).toHaveLength(BOUND + 2);
    }, 30_000);
  }, 180_000);
});
