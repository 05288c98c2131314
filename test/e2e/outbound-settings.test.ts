// The outbound policy set the way an operator sets it (HOOKGATE_OUTBOUND_* in the
// environment of real processes) reaches the engine: in the embedded server, and in a
// gateway + worker pair over Redis (the gateway checks callback URLs before the 202,
// the worker sends the http nodes' requests and the callbacks). A receiver the setting
// allows is reached by an http node and by a callback; one it does not is refused.
// The callback signing secret (HOOKGATE_CALLBACK_SECRET_FILE) reaches the process that
// sends the callbacks: the receiver verifies the delivery with it. A trigger with its
// own callbackSecretRef signs with its Secret's secrets instead, and only with those.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSecret } from '../../runtime/engine/callbacks.ts';
import { startReceiver, type Receiver } from '../engine/receiver.ts';
import { eventually } from '../support/eventually.ts';
import { secret, toYaml, trigger, workflow } from '../support/manifests.ts';
import { freePorts } from '../support/ports.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';

const root = resolve(import.meta.dirname, '..', '..');

let allowed: Receiver;
let other: Receiver;
let dir: string;
let secretDir: string;
/** The secret receivers are given; a second line in the file signs as well. */
const callbackSecret = generateSecret();
/** The secrets of the trigger with its own callbackSecretRef (keys b and a: both sign). */
const ownSecrets = { a: generateSecret(), b: generateSecret(48) };
beforeAll(async () => {
  secretDir = await mkdtemp(join(tmpdir(), 'hookgate-callback-secret-'));
  await writeFile(join(secretDir, 'secret'), `${generateSecret()}\n${callbackSecret}\n`);
  allowed = await startReceiver((req) => ({
    status: 200,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ reached: req.url }),
  }));
  other = await startReceiver(() => ({ status: 200, body: 'must not be reached' }));
  dir = await mkdtemp(join(tmpdir(), 'hookgate-outbound-'));
  const call = (url: string) => ({
    nodes: [{ id: 'call', type: 'http', request: { method: 'POST', url, timeout: '5s' } }],
  });
  await writeFile(
    join(dir, 'outbound.yaml'),
    toYaml(
      workflow('reach', call(`${allowed.url}/node`)),
      workflow('stray', call(`${other.url}/node`)),
      trigger('reach', {
        workflowRef: { name: 'reach' },
        pathSegment: 'in',
        response: { mode: 'waitForCompletion' },
      }),
      trigger('stray', {
        workflowRef: { name: 'stray' },
        pathSegment: 'in',
        response: { mode: 'waitForCompletion' },
      }),
      trigger('callback', {
        workflowRef: { name: 'reach' },
        pathSegment: 'cb',
        response: { mode: 'asyncCallback' },
      }),
      trigger('own-callback', {
        workflowRef: { name: 'reach' },
        pathSegment: 'own-cb',
        response: { mode: 'asyncCallback', callbackSecretRef: { name: 'callback-signing' } },
      }),
      secret('callback-signing', ownSecrets),
    ),
  );
});
afterAll(async () => {
  await allowed.close();
  await other.close();
  await rm(dir, { recursive: true, force: true });
  await rm(secretDir, { recursive: true, force: true });
});

const children: ChildProcess[] = [];
function start(args: string[], env: Record<string, string>): void {
  const clean = { ...process.env };
  for (const name of Object.keys(clean)) if (name.startsWith('HOOKGATE_')) delete clean[name];
  delete clean.REDIS_URL;
  children.push(
    spawn(process.execPath, [join(root, 'roles/cli.ts'), ...args], {
      env: { ...clean, LOG_LEVEL: 'warn', ...env },
      stdio: 'ignore',
    }),
  );
}
async function stopAll(): Promise<void> {
  await Promise.all(
    children.splice(0).map(
      (child) =>
        new Promise<void>((done) => {
          if (child.exitCode !== null) return done();
          child.once('exit', () => done());
          child.kill('SIGTERM');
        }),
    ),
  );
}

const policy = () => ({
  HOOKGATE_OUTBOUND_ALLOW: `127.0.0.1:${allowed.port}`,
  HOOKGATE_CALLBACK_SECRET_FILE: join(secretDir, 'secret'),
});

/** What both modes must show, against the gateway listening on `port`. */
async function expectPolicyApplied(port: number): Promise<void> {
  const url = (workflowName: string, segment: string) =>
    `http://127.0.0.1:${port}/webhook/default_production_${workflowName}/${segment}`;
  const post = (target: string, headers: Record<string, string> = {}) =>
    fetch(target, {
      method: 'POST',
      body: '{"n":1}',
      headers: { 'content-type': 'application/json', ...headers },
    });
  // Served once the routes are loaded.
  await eventually(
    async () => expect((await post(url('reach', 'in'))).status).toBe(200),
    90_000,
    200,
  );
  const reached = await post(url('reach', 'in'));
  expect(await reached.json()).toMatchObject({ status: 200, body: { reached: '/node' } });

  const refused = await post(url('stray', 'in'));
  expect(refused.status).toBe(500);
  const problem = (await refused.json()) as { code: string; detail: string };
  expect(problem.code).toBe('HG_ERR_OUTBOUND_REFUSED');
  expect(problem.detail).toMatch(/address 127\.0\.0\.1 is not public \(loopback\)/);
  expect(other.received).toHaveLength(0);

  const before = allowed.received.filter((r) => r.url === '/cb').length;
  const accepted = await post(url('reach', 'cb'), { 'x-callback-url': `${allowed.url}/cb` });
  expect(accepted.status).toBe(202);
  await eventually(
    () => expect(allowed.received.filter((r) => r.url === '/cb').length).toBe(before + 1),
    20_000,
    100,
  );
  const verify = (path: string, secret: string) => {
    const delivery = allowed.received.filter((r) => r.url === path).at(-1);
    const headers = Object.fromEntries(
      Object.entries(delivery?.headers ?? {}).map(([name, value]) => [name, String(value)]),
    );
    return new Webhook(secret).verify(delivery?.body ?? '', headers);
  };
  expect(verify('/cb', callbackSecret)).toMatchObject({ type: 'execution.completed' });

  const own = await post(url('reach', 'own-cb'), { 'x-callback-url': `${allowed.url}/own` });
  expect(own.status).toBe(202);
  await eventually(
    () => expect(allowed.received.filter((r) => r.url === '/own')).toHaveLength(1),
    20_000,
    100,
  );
  // Signed with each of the trigger's secrets, not with the process's.
  expect(verify('/own', ownSecrets.a)).toMatchObject({ type: 'execution.completed' });
  expect(verify('/own', ownSecrets.b)).toMatchObject({ type: 'execution.completed' });
  expect(() => verify('/own', callbackSecret)).toThrow();
  const notAllowed = await post(url('reach', 'cb'), { 'x-callback-url': `${other.url}/cb` });
  expect(notAllowed.status).toBe(400);
  expect(((await notAllowed.json()) as { code: string }).code).toBe('HG_ERR_CALLBACK_URL_REFUSED');
}

describe('embedded: hookgate dev', () => {
  afterAll(stopAll);

  it('the setting reaches the in-process engine and the callback check', async () => {
    const [port, adminPort] = (await freePorts(2)) as [number, number];
    start(
      ['dev', '--dir', dir, '--port', String(port), '--admin-port', String(adminPort)],
      policy(),
    );
    await expectPolicyApplied(port);
  }, 120_000);

  it('a bad setting stops the process before it serves', async () => {
    const [port, adminPort] = (await freePorts(2)) as [number, number];
    start(['dev', '--dir', dir, '--port', String(port), '--admin-port', String(adminPort)], {
      HOOKGATE_OUTBOUND_ALLOW: '169.254.169.254',
    });
    const child = children.at(-1) as ChildProcess;
    const code = await new Promise<number | null>((done) => child.once('exit', done));
    expect(code).toBe(2);
  }, 60_000);

  it('a callback secret file that is missing or holds no signing secret stops it too', async () => {
    await writeFile(join(secretDir, 'bad'), 'not-a-secret\n');
    for (const file of [join(secretDir, 'bad'), join(secretDir, 'missing')]) {
      const [port, adminPort] = (await freePorts(2)) as [number, number];
      start(['dev', '--dir', dir, '--port', String(port), '--admin-port', String(adminPort)], {
        HOOKGATE_CALLBACK_SECRET_FILE: file,
      });
      const child = children.at(-1) as ChildProcess;
      const code = await new Promise<number | null>((done) => child.once('exit', done));
      expect(code).toBe(2);
    }
  }, 60_000);
});

describe.skipIf(!redisAvailable())('gateway + worker over Redis', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis();
  }, 60_000);
  afterAll(async () => {
    await stopAll();
    await redis.stop();
  });

  it('the setting reaches the worker that runs the executions and the gateway that takes them', async () => {
    const [port, adminPort, gatewayPort, gatewayAdminPort, workerPort] = (await freePorts(5)) as [
      number,
      number,
      number,
      number,
      number,
    ];
    const common = { REDIS_URL: redis.url, HOOKGATE_ADMIN_AUTH: 'none' };
    // The dev role writes the directory's routes and workflows to Redis (no outbound
    // setting: it runs nothing here); the gateway queues, the worker runs.
    start(['dev', '--dir', dir, '--port', String(port), '--admin-port', String(adminPort)], common);
    start(['gateway', '--port', String(gatewayPort), '--admin-port', String(gatewayAdminPort)], {
      ...common,
      ...policy(),
      HOOKGATE_EXECUTIONS: 'queue',
    });
    start(['worker', '--port', String(workerPort)], { ...common, ...policy() });
    await expectPolicyApplied(gatewayPort);
  }, 180_000);
});
