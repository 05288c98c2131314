// Rotating a trigger's callback signing Secret (response.callbackSecretRef) while one of
// its Async Callbacks is being delivered: each delivery attempt signs with the secrets
// the route record holds at that attempt (ADR 0035), as the operator re-resolves the
// edited Secret. The first attempt signs with the old key; the Secret then lists the old
// and the new key (both sign); then the new one alone, and the last attempt verifies
// with the new key only. In each process that sends callbacks: the embedded server
// (routes in memory), a gateway running its executions inline and a worker taking them
// off the Redis queue (routes in Redis).
import type { FastifyInstance } from 'fastify';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RedisClient } from '../../api/records/redis-client.ts';
import type { RouteStore } from '../../api/records/records.ts';
import { createGatewayRuntime } from '../../roles/gateway.ts';
import type { Serving } from '../../roles/serving.ts';
import { createWorkerRuntime, type WorkerRuntime } from '../../roles/worker.ts';
import { generateSecret } from '../../runtime/engine/callbacks.ts';
import { startReceiver, type Received, type Receiver } from '../engine/receiver.ts';
import { eventually } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { secret, trigger, workflow } from '../support/manifests.ts';
import { redisAvailable } from '../support/redis.ts';
import { singleRedis, type RedisBackend } from '../support/redis-backends.ts';

const KEY = 'default/rotating';
const old = generateSecret();
const next = generateSecret(48);

let receiver: Receiver;
/** Set by the running test: the receiver's answer to attempt `index`. */
let answer: (index: number) => Promise<number> = () => Promise.resolve(200);
beforeAll(async () => {
  receiver = await startReceiver(async (_req, index) => ({ status: await answer(index) }));
});
afterAll(async () => {
  await receiver.close();
});

const outbound = () => ({ allow: [`127.0.0.1:${receiver.port}`] });

/** The manifests (the Secret in a file of its own, edited by the test). */
async function deploy(control: TestRuntime): Promise<void> {
  await control.apply('secret.yaml', [secret('rotating-callbacks', { a: old })]);
  await control.apply(
    'rotating.yaml',
    [
      workflow('rot', { nodes: [{ id: 'done', type: 'transform', expression: '{ "ok": true }' }] }),
      trigger('rotating', {
        workflowRef: { name: 'rot' },
        pathSegment: 'callback',
        response: { mode: 'asyncCallback', callbackSecretRef: { name: 'rotating-callbacks' } },
      }),
    ],
    ['rotating'],
  );
}

/** Edits the Secret and waits until the operator has written it into the route record. */
async function rotate(control: TestRuntime, routes: RouteStore, data: Record<string, string>) {
  await control.apply('secret.yaml', [secret('rotating-callbacks', data)]);
  const secrets = Object.keys(data)
    .sort()
    .map((key) => data[key]);
  await eventually(async () =>
    expect((await routes.get(KEY))?.credentials.callbackSecrets).toEqual(secrets),
  );
}

function verify(secretText: string, req: Received): unknown {
  return new Webhook(secretText).verify(req.body, {
    'webhook-id': String(req.headers['webhook-id']),
    'webhook-timestamp': String(req.headers['webhook-timestamp']),
    'webhook-signature': String(req.headers['webhook-signature']),
  });
}

/** One callback through `app`, its Secret rotated while the receiver answers 503. */
async function expectRotationFollowed(control: TestRuntime, app: FastifyInstance): Promise<void> {
  receiver.received.length = 0;
  const routes = control.routes;
  await rotate(control, routes, { a: old }); // as deploy() left it, whatever ran before
  answer = async (index) => {
    if (index === 0) await rotate(control, routes, { a: old, b: next });
    else if (index === 1) await rotate(control, routes, { b: next });
    else return 200;
    return 503;
  };
  const accepted = await app.inject({
    method: 'POST',
    url: '/webhook/default_production_rot/callback',
    headers: { 'x-callback-url': `${receiver.url}/rotating` },
    payload: {},
  });
  expect(accepted.statusCode).toBe(202);
  const { executionId } = accepted.json<{ executionId: string }>();
  await eventually(() => expect(receiver.received).toHaveLength(3), 20_000);
  const [first, overlap, last] = receiver.received as [Received, Received, Received];
  expect(verify(old, first)).toMatchObject({ executionId });
  expect(() => verify(next, first)).toThrow();
  expect(verify(old, overlap)).toMatchObject({ executionId });
  expect(verify(next, overlap)).toMatchObject({ executionId });
  expect(verify(next, last)).toMatchObject({ executionId, status: 'succeeded' });
  expect(() => verify(old, last)).toThrow();
}

describe('embedded: hookgate dev (routes in memory)', () => {
  let control: TestRuntime;
  beforeAll(async () => {
    control = await startRuntime({
      engine: { outbound: outbound(), callbacks: { backoffMs: 20, timeoutMs: 10_000 } },
    });
    await deploy(control);
  });
  afterAll(async () => {
    await control?.stop();
  });

  it('each delivery attempt signs with the Secret as the route holds it then', async () => {
    await expectRotationFollowed(control, control.app);
  });
});

describe.skipIf(!redisAvailable())('over Redis (routes written by the operator)', () => {
  let backend: RedisBackend;
  const clients: RedisClient[] = [];
  const redis = () => {
    const c = backend.connect();
    clients.push(c);
    return c;
  };
  let control: TestRuntime;
  const closers: (() => Promise<unknown>)[] = [];
  beforeAll(async () => {
    backend = await singleRedis();
    control = await startRuntime({ redis: redis() });
    await deploy(control);
  }, 60_000);
  afterAll(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    await control?.stop();
    for (const c of clients) c.disconnect();
    await backend?.stop();
  });

  async function gateway(executions: 'inline' | 'queue'): Promise<Serving> {
    const serving = await createGatewayRuntime({
      redis: redis(),
      baseUrl: 'http://localhost',
      executions,
      engine: { outbound: outbound(), callbacks: { backoffMs: 300, timeoutMs: 10_000 } },
    });
    closers.push(() => serving.close());
    await eventually(() => expect(serving.table.size).toBe(1));
    return serving;
  }

  it('a gateway running its executions inline', async () => {
    const inline = await gateway('inline');
    await expectRotationFollowed(control, inline.app);
  }, 60_000);

  it('a worker taking them off the queue', async () => {
    const queueing = await gateway('queue');
    const worker: WorkerRuntime = await createWorkerRuntime({
      redis: redis(),
      engine: { outbound: outbound(), callbacks: { backoffMs: 300, timeoutMs: 10_000 } },
      blockMs: 200,
    });
    closers.push(() => worker.close(2_000));
    await expectRotationFollowed(control, queueing.app);
  }, 60_000);
});
