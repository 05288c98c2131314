// Rotating a trigger's callback signing Secret (response.callbackSecretRef) while one of
// its Async Callbacks is being delivered: each delivery attempt signs with the secrets
// the route record holds at that attempt (ADR 0035), as the operator re-resolves the
// edited Secret. The first attempt signs with the old key; the Secret then lists the old
// and the new key (both sign); then the new one alone, and the last attempt verifies
// with the new key only. In each process that sends callbacks: the embedded server
// (routes in memory), a gateway running its executions inline and a worker taking them
// off the Redis queue (routes in Redis).
//
// A trigger deleted and created again under its name (another uid, another Secret) is
// not the trigger a run came in on: the run's remaining attempts are not signed, neither
// with the newcomer's key nor with the process's, and the outcome says the trigger was
// re-created (ADR 0035, amended 2026-11-28). Re-created through the Kubernetes source
// (the in-memory API server gives the newcomer another uid, as a cluster does). The
// directory source gives a manifest taken out and put back the same uid: the same
// trigger, which signs with the Secret it names then.
import type { FastifyInstance } from 'fastify';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RedisClient } from '../../api/records/redis-client.ts';
import type { RouteStore } from '../../api/records/records.ts';
import type { ExecutionEngine } from '../../runtime/engine/ports.ts';
import { createGatewayRuntime } from '../../roles/gateway.ts';
import type { Serving } from '../../roles/serving.ts';
import { createWorkerRuntime, type WorkerRuntime } from '../../roles/worker.ts';
import { generateSecret } from '../../runtime/engine/callbacks.ts';
import { startReceiver, type Received, type Receiver } from '../engine/receiver.ts';
import { eventually, sleep } from '../support/eventually.ts';
import { startRuntime, type ControlRuntime, type TestRuntime } from '../support/gateway.ts';
import { startKubeRuntime } from '../support/kube-runtime.ts';
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

const rotWorkflow = workflow('rot', {
  nodes: [{ id: 'done', type: 'transform', expression: '{ "ok": true }' }],
});
const rotTrigger = (secretName: string) =>
  trigger('rotating', {
    workflowRef: { name: 'rot' },
    pathSegment: 'callback',
    response: { mode: 'asyncCallback', callbackSecretRef: { name: secretName } },
  });

/** The manifests (the Secret in a file of its own, edited by the test). */
async function deploy(control: ControlRuntime): Promise<void> {
  await control.apply('secret.yaml', [secret('rotating-callbacks', { a: old })]);
  await control.apply(
    'rotating.yaml',
    [rotWorkflow, rotTrigger('rotating-callbacks')],
    ['rotating'],
  );
}

/** The key of the trigger created under the same name after the first was deleted. */
const newcomer = generateSecret();
const RECREATED = `not signed: endpoint ${KEY} was deleted and re-created since this run started (another WebhookTrigger uid)`;

/**
 * Deletes the trigger, then creates one under its name signing with another Secret, and
 * waits until the operator has written the newcomer's route (another uid).
 */
async function recreate(control: ControlRuntime, routes: RouteStore): Promise<void> {
  const before = (await routes.get(KEY))?.uid;
  expect(before).toBeTruthy();
  await control.apply('rotating.yaml', [rotWorkflow]);
  await eventually(async () => expect(await routes.get(KEY)).toBeUndefined());
  await control.apply('newcomer.yaml', [secret('newcomer-callbacks', { a: newcomer })]);
  await control.apply(
    'rotating.yaml',
    [rotWorkflow, rotTrigger('newcomer-callbacks')],
    ['rotating'],
  );
  await eventually(async () => {
    const now = await routes.get(KEY);
    expect(now?.credentials.callbackSecrets).toEqual([newcomer]);
    expect(now?.uid).toBeTruthy();
    expect(now?.uid).not.toBe(before);
  });
}

/** The trigger as deploy() made it, its Secret with the old key only (the route says so). */
async function redeploy(control: ControlRuntime): Promise<void> {
  await deploy(control);
  await rotate(control, control.routes, { a: old });
}

/** The callback outcome of execution `id`, once its delivery has ended. */
async function outcomeOf(engine: ExecutionEngine, id: string): Promise<unknown> {
  return eventually(async () => {
    const execution = await engine.get(id);
    expect(execution?.callback).toBeDefined();
    return execution?.callback;
  }, 20_000);
}

async function accept(app: FastifyInstance): Promise<string> {
  const accepted = await app.inject({
    method: 'POST',
    url: '/webhook/default_production_rot/callback',
    headers: { 'x-callback-url': `${receiver.url}/rotating` },
    payload: {},
  });
  expect(accepted.statusCode).toBe(202);
  return accepted.json<{ executionId: string }>().executionId;
}

/**
 * One callback through `app`, its trigger deleted and re-created under its name while
 * the receiver answers the first attempt 503: nothing more is sent.
 */
async function expectRecreationRefused(
  control: ControlRuntime,
  app: FastifyInstance,
  engine: ExecutionEngine,
): Promise<void> {
  await redeploy(control);
  receiver.received.length = 0;
  answer = async (index) => {
    if (index > 0) return 200;
    await recreate(control, control.routes);
    return 503;
  };
  const executionId = await accept(app);
  expect(await outcomeOf(engine, executionId)).toEqual({
    delivered: false,
    attempts: 5,
    reason: RECREATED,
  });
  expect(receiver.received).toHaveLength(1);
  expect(verify(old, receiver.received[0] as Received)).toMatchObject({ executionId });
  await redeploy(control);
}

/** Edits the Secret and waits until the operator has written it into the route record. */
async function rotate(control: ControlRuntime, routes: RouteStore, data: Record<string, string>) {
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
async function expectRotationFollowed(
  control: ControlRuntime,
  app: FastifyInstance,
): Promise<void> {
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
  const engine = () => ({
    outbound: outbound(),
    callbacks: { backoffMs: 20, timeoutMs: 10_000 },
  });
  let control: TestRuntime;
  beforeAll(async () => {
    control = await startRuntime({ engine: engine() });
    await deploy(control);
  });
  afterAll(async () => {
    await control?.stop();
  });

  it('each delivery attempt signs with the Secret as the route holds it then', async () => {
    await expectRotationFollowed(control, control.app);
  });

  it('a manifest taken out of the folder and put back is the same trigger (the same uid): the next attempt signs with the Secret it names then', async () => {
    await redeploy(control);
    receiver.received.length = 0;
    const before = (await control.routes.get(KEY))?.uid;
    expect(before).toBeTruthy();
    answer = async (index) => {
      if (index > 0) return 200;
      await control.apply('rotating.yaml', [rotWorkflow]);
      await eventually(async () => expect(await control.routes.get(KEY)).toBeUndefined());
      await control.apply('newcomer.yaml', [secret('newcomer-callbacks', { a: newcomer })]);
      await control.apply(
        'rotating.yaml',
        [rotWorkflow, rotTrigger('newcomer-callbacks')],
        ['rotating'],
      );
      await eventually(async () =>
        expect((await control.routes.get(KEY))?.credentials.callbackSecrets).toEqual([newcomer]),
      );
      return 503;
    };
    const executionId = await accept(control.app);
    expect(await outcomeOf(control.engine, executionId)).toEqual({
      delivered: true,
      attempts: 2,
      status: 200,
    });
    expect((await control.routes.get(KEY))?.uid).toBe(before);
    const [first, second] = receiver.received as [Received, Received];
    expect(verify(old, first)).toMatchObject({ executionId });
    expect(verify(newcomer, second)).toMatchObject({ executionId, status: 'succeeded' });
    await redeploy(control);
  });

  it('a trigger deleted and re-created under its name (hookgate dev --source kubernetes): the remaining attempts are not signed', async () => {
    const kube = await startKubeRuntime({ engine: engine() });
    try {
      await deploy(kube);
      await expectRecreationRefused(kube, kube.app, kube.engine);
    } finally {
      await kube.stop();
    }
  }, 60_000);
});

// The operator's reconcile loop over the Kubernetes source (the in-memory API server)
// writes the routes to Redis.
describe.skipIf(!redisAvailable())('over Redis (routes written by the operator)', () => {
  let backend: RedisBackend;
  const clients: RedisClient[] = [];
  const redis = () => {
    const c = backend.connect();
    clients.push(c);
    return c;
  };
  let control: ControlRuntime;
  const closers: (() => Promise<unknown>)[] = [];
  beforeAll(async () => {
    backend = await singleRedis();
    control = await startKubeRuntime({ redis: redis() });
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

  async function worker(): Promise<WorkerRuntime> {
    const started = await createWorkerRuntime({
      redis: redis(),
      engine: { outbound: outbound(), callbacks: { backoffMs: 300, timeoutMs: 10_000 } },
      blockMs: 200,
    });
    closers.push(() => started.close(2_000));
    return started;
  }

  it('a gateway running its executions inline', async () => {
    const inline = await gateway('inline');
    await expectRotationFollowed(control, inline.app);
    await expectRecreationRefused(control, inline.app, inline.engine);
  }, 60_000);

  it('a worker that takes the job after the trigger was re-created: the job fails unrun, nothing is sent', async () => {
    // No worker yet: the job waits while the trigger is deleted and created again.
    await redeploy(control);
    const queueing = await gateway('queue');
    receiver.received.length = 0;
    answer = () => Promise.resolve(200);
    const executionId = await accept(queueing.app);
    await recreate(control, control.routes);
    await worker();
    // Failed like a job whose trigger is gone: the newcomer's workflow, schemas, response
    // and callback settings are not those of the trigger the request came in on.
    const read = await eventually(async () => {
      const res = await queueing.admin.inject({
        method: 'GET',
        url: `/api/executions/${executionId}`,
      });
      expect(res.statusCode).toBe(200);
      const execution = res.json<Record<string, unknown>>();
      expect(execution.status).toBe('failed');
      return execution;
    }, 20_000);
    expect(read.error).toEqual({
      message: `endpoint ${KEY} was deleted and re-created since this execution was accepted (another WebhookTrigger uid): it is not run under the new trigger`,
      statusCode: 500,
      code: 'HG_ERR_TRIGGER_RECREATED',
      kind: 'unrunnable',
    });
    expect(read.log).toEqual([]);
    expect(read).not.toHaveProperty('output');
    expect(read).not.toHaveProperty('triggerUid');
    // No callback: neither signed with the newcomer's key nor with the process's (a first
    // attempt would have come within the backoff of 300 ms).
    await sleep(1_000);
    expect(receiver.received).toHaveLength(0);
    expect((await queueing.engine.get(executionId))?.callback).toBeUndefined();
    await redeploy(control);
  }, 60_000);

  it('a worker taking them off the queue', async () => {
    const queueing = await gateway('queue');
    await worker();
    await expectRotationFollowed(control, queueing.app);
    await expectRecreationRefused(control, queueing.app, queueing.engine);
  }, 60_000);
});
