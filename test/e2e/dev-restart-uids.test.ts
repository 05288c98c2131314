// `hookgate dev` with REDIS_URL writes its folder's routes to Redis, where gateways and
// workers serve them and keep their executions (dead letters, callbacks being retried)
// across a restart of the dev process. Each execution keeps the uid of the
// WebhookTrigger it came in on (ADR 0035, ADR 0018: amended 2026-11-28), so the
// directory source has to give a trigger the same uid in every process over the folder:
// a restart with new uids made every execution from before look like a run of a
// re-created trigger (retries and replays 409 replay-trigger-recreated, the callbacks of
// triggers with secrets of their own never sent).
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RouteRecord } from '../../api/records/records.ts';
import { REDIS_KEYS, RedisRecordStore } from '../../api/records/redis-store.ts';
import { createGatewayRuntime } from '../../roles/gateway.ts';
import type { Serving } from '../../roles/serving.ts';
import { createWorkerRuntime, type WorkerRuntime } from '../../roles/worker.ts';
import { generateSecret } from '../../runtime/engine/callbacks.ts';
import type { Execution } from '../../runtime/engine/ports.ts';
import { startReceiver, type Received, type Receiver } from '../engine/receiver.ts';
import { eventually } from '../support/eventually.ts';
import { manifestDir, secret, trigger, workflow } from '../support/manifests.ts';
import { freePorts } from '../support/ports.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const KEY = 'default/late';
const PATH = '/webhook/default_production_doomed/late';
const signingKey = generateSecret();

describe.skipIf(!redisAvailable())('hookgate dev with REDIS_URL, restarted', () => {
  let redis: RedisServer;
  let manifests: Awaited<ReturnType<typeof manifestDir>>;
  const clients: Redis[] = [];
  let routes: RedisRecordStore<RouteRecord>;
  let gateway: Serving;
  let worker: WorkerRuntime;
  let receiver: Receiver;
  /** The receiver refuses every callback (503) until the dev process has restarted. */
  let restarted = false;
  let dev: ChildProcess | undefined;
  let ports: number[];

  const client = () => {
    const c = new Redis(redis.url);
    clients.push(c);
    return c;
  };

  /** `hookgate dev` over the folder and the Redis, until its trigger is Ready. */
  async function startDev(): Promise<void> {
    const [port, adminPort] = ports as [number, number];
    const child = spawn(
      process.execPath,
      [join(ROOT, 'roles', 'cli.ts'), 'dev', '--dir', manifests.dir, '--port', String(port)],
      {
        cwd: ROOT,
        env: {
          ...process.env,
          REDIS_URL: redis.url,
          ADMIN_PORT: String(adminPort),
          HOOKGATE_ADMIN_AUTH: 'none',
          LOG_LEVEL: 'warn',
        },
        stdio: 'ignore',
      },
    );
    dev = child;
    await eventually(
      async () => {
        const res = await fetch(`http://127.0.0.1:${adminPort}/api/triggers`);
        const { items } = (await res.json()) as {
          items: { name: string; status: { conditions?: { type: string; status: string }[] } }[];
        };
        const late = items.find((t) => t.name === 'late');
        expect(late?.status.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
      },
      60_000,
      200,
    );
  }

  async function stopDev(): Promise<void> {
    const child = dev;
    dev = undefined;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }

  const admin = (url: string) => gateway.admin.inject({ method: 'POST', url });
  const execution = async (id: string) =>
    (await gateway.admin.inject({ method: 'GET', url: `/api/executions/${id}` })).json<Execution>();
  const listed = async (id: string) =>
    (await gateway.admin.inject({ method: 'GET', url: `/api/dead-letters/${id}` })).statusCode;
  const callbacksOf = (id: string) =>
    receiver.received.filter(
      (r) => (JSON.parse(r.body) as { executionId?: string }).executionId === id,
    );

  beforeAll(async () => {
    redis = await startRedis();
    ports = await freePorts(2);
    manifests = await manifestDir();
    await manifests.write(
      'late.yaml',
      secret('late-callbacks', { a: signingKey }),
      workflow('doomed', {
        nodes: [{ id: 'stop', type: 'fail', expression: '"down"', statusCode: 502 }],
        retry: {
          attempts: 1,
          backoff: { initial: '20ms', max: '1s', multiplier: 2, jitter: 0.5 },
          on: ['fail'],
        },
      }),
      trigger('late', {
        workflowRef: { name: 'doomed' },
        pathSegment: 'late',
        response: { mode: 'asyncCallback', callbackSecretRef: { name: 'late-callbacks' } },
      }),
    );
    receiver = await startReceiver(() => ({ status: restarted ? 200 : 503 }));
    const outbound = { allow: [`127.0.0.1:${receiver.port}`] };
    routes = new RedisRecordStore<RouteRecord>({ redis: client(), key: REDIS_KEYS.routes });
    await startDev();
    gateway = await createGatewayRuntime({
      redis: client(),
      baseUrl: 'http://localhost',
      engine: { outbound },
    });
    await eventually(() => expect(gateway.table.size).toBe(1));
    worker = await createWorkerRuntime({
      redis: client(),
      // Enough attempts, a second apart at most, to outlast the restart.
      engine: { outbound, callbacks: { backoffMs: 200, maxBackoffMs: 1_000, maxAttempts: 90 } },
      blockMs: 200,
    });
  }, 120_000);
  afterAll(async () => {
    await stopDev();
    await worker?.close(2_000);
    await gateway?.close();
    routes?.close();
    for (const c of clients) c.disconnect();
    await receiver?.close();
    await redis?.stop();
    await manifests?.cleanup();
  });

  it('keeps its triggers’ uids: executions from before are retried and replayed, their pending callbacks signed and sent', async () => {
    const accepted = await gateway.app.inject({
      method: 'POST',
      url: PATH,
      headers: { 'content-type': 'application/json', 'x-callback-url': `${receiver.url}/cb` },
      payload: '{"orderId":1}',
    });
    expect(accepted.statusCode, accepted.body).toBe(202);
    const { executionId } = accepted.json<{ executionId: string }>();
    await eventually(async () => expect(await listed(executionId)).toBe(200), 15_000);
    // Its callback (the failure) is being retried: the receiver answers 503 for now.
    await eventually(() => expect(callbacksOf(executionId).length).toBeGreaterThan(0));
    const uid = (await routes.get(KEY))?.uid;
    expect(uid).toBeTruthy();

    await stopDev();
    await startDev();
    restarted = true;

    // Its dead letter is retried, and it is replayed, without allowRecreated. (The
    // retry first: a replay before it would take the entry, ADR 18 amended 2026-11-28.)
    const retried = await admin(`/api/dead-letters/${executionId}/retry`);
    expect(retried.statusCode, retried.body).toBe(202);
    expect(retried.json()).toMatchObject({ replayOf: executionId });
    expect(await listed(executionId)).toBe(404);
    const replayed = await admin(`/api/executions/${executionId}/replay`);
    expect(replayed.statusCode, replayed.body).toBe(202);

    // The callback of the run from before is sent, signed with the trigger's Secret.
    const delivered = await eventually(async () => {
      const e = await execution(executionId);
      expect(e.callback).toBeDefined();
      return e.callback;
    }, 60_000);
    expect(delivered).toMatchObject({ delivered: true, status: 200 });
    const last = callbacksOf(executionId).at(-1) as Received;
    expect(
      new Webhook(signingKey).verify(last.body, {
        'webhook-id': String(last.headers['webhook-id']),
        'webhook-timestamp': String(last.headers['webhook-timestamp']),
        'webhook-signature': String(last.headers['webhook-signature']),
      }),
    ).toMatchObject({ executionId });
    // The route the dev process wrote again is the same trigger's.
    expect((await routes.get(KEY))?.uid).toBe(uid);
  }, 180_000);
});
