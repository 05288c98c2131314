import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  CallbackSender,
  generateSecret,
  signPayload,
  validateCallbackUrl,
  type CallbackBody,
} from '../../runtime/engine/callbacks.ts';
import { signingSecretProblem } from '../../api/callback-signing-secret.ts';
import { MemoryRecordStore } from '../../api/records/memory-store.ts';
import type { RouteRecord } from '../../api/records/records.ts';
import type { RetryPolicy } from '../../api/v1alpha1/workflow.ts';
import { InProcessEngine } from '../../runtime/engine/engine.ts';
import type { Execution } from '../../runtime/engine/ports.ts';
import { callbackSigning, triggerRef } from '../../runtime/engine/trigger-ref.ts';
import { HttpProblem } from '../../runtime/errors.ts';
import { createHttpApp } from '../../runtime/http-app.ts';
import { recoveryRoutes } from '../../runtime/read-api/recovery-routes.ts';
import { eventually } from '../support/eventually.ts';
import { credentialLeaks, finished, ref, route, trigger, workflow } from './helpers.ts';
import { startReceiver, type Received, type Receiver, type Reply } from './receiver.ts';

function execution(id = 'exec-1'): Execution {
  return {
    id,
    workflowId: 'shop_development_orders',
    triggerKey: 'shop/orders-hook',
    status: 'succeeded',
    createdAt: '2026-11-23T08:00:00.000Z',
    startedAt: '2026-11-23T08:00:00.010Z',
    finishedAt: '2026-11-23T08:00:00.020Z',
    input: trigger({ n: 1 }, id),
    output: { total: 10 },
    log: [],
  };
}

function verify(secret: string, req: Received): unknown {
  return new Webhook(secret).verify(req.body, {
    'webhook-id': String(req.headers['webhook-id']),
    'webhook-timestamp': String(req.headers['webhook-timestamp']),
    'webhook-signature': String(req.headers['webhook-signature']),
  });
}

describe('signing (Standard Webhooks)', () => {
  it('matches the G12 test vector', () => {
    expect(
      signPayload(
        'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
        'msg_p5jXN8AQM9LWM0D4loKWxJek',
        1614265330,
        '{"test": 2432232314}',
      ),
    ).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  it('signs with every secret during rotation, space-separated', () => {
    const a = generateSecret();
    const b = generateSecret(24);
    const both = signPayload([a, b], 'msg_1', 1, 'x');
    expect(both.split(' ')).toEqual([
      signPayload(a, 'msg_1', 1, 'x'),
      signPayload(b, 'msg_1', 1, 'x'),
    ]);
  });

  it('generates whsec_ secrets of 24-64 bytes and rejects bad ones', () => {
    const secret = generateSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32);
    expect(() => generateSecret(16)).toThrow();
    expect(() => new CallbackSender({ secret: 'nope' })).toThrow(/whsec_/);
    expect(
      () => new CallbackSender({ secret: 'whsec_' + Buffer.alloc(8).toString('base64') }),
    ).toThrow(/24 to 64/);
  });

  it('takes only secrets a Standard Webhooks receiver can use (the standard base64 alphabet)', () => {
    const bytes = Buffer.from('fb'.repeat(32), 'hex'); // base64 +/+/..., base64url -_-_...
    const unusable = [
      `whsec_${bytes.toString('base64url')}`,
      `whsec_${bytes.toString('base64').slice(0, 20)} ${bytes.toString('base64').slice(20)}`,
    ];
    for (const secret of unusable) {
      // What the receivers' library says of it (docs/callbacks.md, "Verifying").
      expect(() => new Webhook(secret), secret).toThrow();
      expect(signingSecretProblem(secret), secret).toMatch(/standard base64/);
      expect(() => new CallbackSender({ secret }), secret).toThrow(/standard base64/);
    }
    const usable = `whsec_${bytes.toString('base64')}`;
    expect(() => new Webhook(usable)).not.toThrow();
    expect(signingSecretProblem(usable)).toBeUndefined();
  });
});

describe('validateCallbackUrl', () => {
  const refused = [
    'http://example.com/cb',
    'https://127.0.0.1/cb',
    'https://10.0.0.1/cb',
    'https://169.254.169.254/cb',
    'https://[::1]/cb',
    'https://[::ffff:7f00:1]/cb',
    'https://2130706433/cb',
    'https://0x7f000001/cb',
    'ftp://example.com/cb',
    'not a url',
    `https://example.com/${'x'.repeat(2100)}`,
  ];
  for (const url of refused) {
    it(`refuses ${url.slice(0, 40)}`, () => {
      try {
        validateCallbackUrl(url);
        expect.unreachable();
      } catch (error) {
        expect(error).toBeInstanceOf(HttpProblem);
        expect((error as HttpProblem).code).toBe('HG_ERR_CALLBACK_URL_REFUSED');
        expect((error as HttpProblem).status).toBe(400);
      }
    });
  }

  it('a missing URL is HG_ERR_CALLBACK_URL_MISSING', () => {
    expect(() => validateCallbackUrl(undefined)).toThrow(
      expect.objectContaining({ code: 'HG_ERR_CALLBACK_URL_MISSING' }) as Error,
    );
    expect(() => validateCallbackUrl('  ')).toThrow(
      expect.objectContaining({ code: 'HG_ERR_CALLBACK_URL_MISSING' }) as Error,
    );
  });

  it('accepts https host names and allow-listed local receivers', () => {
    expect(validateCallbackUrl('https://hooks.example.com/cb').hostname).toBe('hooks.example.com');
    expect(
      validateCallbackUrl('http://127.0.0.1:8123/cb', { allow: ['127.0.0.1:8123'] }).port,
    ).toBe('8123');
  });
});

describe('callback delivery', () => {
  let receiver: Receiver;
  let script: Reply = () => ({ status: 204 });
  beforeAll(async () => {
    receiver = await startReceiver((req, i) => script(req, i));
  });
  afterAll(async () => {
    await receiver.close();
  });
  afterEach(() => {
    receiver.received.length = 0;
  });

  const senders: CallbackSender[] = [];
  function sender(options: ConstructorParameters<typeof CallbackSender>[0] = {}): CallbackSender {
    const s = new CallbackSender({
      guard: { allow: [`127.0.0.1:${receiver.port}`] },
      backoffMs: 1,
      timeoutMs: 2000,
      ...options,
    });
    senders.push(s);
    return s;
  }
  afterEach(async () => {
    await Promise.all(senders.splice(0).map((s) => s.close()));
  });

  it('POSTs the signed result; standardwebhooks verifies it', async () => {
    script = () => ({ status: 204 });
    const s = sender();
    const result = await s.deliver(`${receiver.url}/cb`, execution());
    expect(result).toEqual({ delivered: true, webhookId: 'msg_exec-1', attempts: 1, status: 204 });
    const req = receiver.received[0] as Received;
    expect(req.method).toBe('POST');
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.headers['webhook-id']).toBe('msg_exec-1');
    const body = verify(s.secret, req) as CallbackBody;
    expect(body).toEqual({
      type: 'execution.completed',
      executionId: 'exec-1',
      workflowId: 'shop_development_orders',
      triggerKey: 'shop/orders-hook',
      status: 'succeeded',
      output: { total: 10 },
      createdAt: '2026-11-23T08:00:00.000Z',
      startedAt: '2026-11-23T08:00:00.010Z',
      finishedAt: '2026-11-23T08:00:00.020Z',
      correlationId: 'corr-1',
      requestId: 'req-1',
    });
    expect(() => verify(generateSecret(), req)).toThrow();
  });

  it('retries after 500s with the same webhook-id, each attempt verifiable', async () => {
    script = (_req, i) => (i < 2 ? { status: 500 } : { status: 200 });
    const s = sender();
    const result = await s.deliver(`${receiver.url}/cb`, execution('exec-2'));
    expect(result).toMatchObject({ delivered: true, attempts: 3, status: 200 });
    expect(receiver.received).toHaveLength(3);
    expect(new Set(receiver.received.map((r) => r.headers['webhook-id']))).toEqual(
      new Set(['msg_exec-2']),
    );
    expect(new Set(receiver.received.map((r) => r.body)).size).toBe(1);
    for (const req of receiver.received) expect(verify(s.secret, req)).toBeTruthy();
  });

  it('retries after a timeout with the same webhook-id', async () => {
    script = (_req, i) => (i === 0 ? { status: 200, hangMs: 1500 } : { status: 200 });
    const s = sender({ timeoutMs: 300 });
    const result = await s.deliver(`${receiver.url}/cb`, execution('exec-3'));
    expect(result).toMatchObject({ delivered: true, attempts: 2 });
    expect(receiver.received.map((r) => r.headers['webhook-id'])).toEqual([
      'msg_exec-3',
      'msg_exec-3',
    ]);
  });

  it('retries 429 (honouring Retry-After) and gives up after maxAttempts', async () => {
    script = () => ({ status: 429, headers: { 'retry-after': '0' } });
    const s = sender({ maxAttempts: 3 });
    const result = await s.deliver(`${receiver.url}/cb`, execution());
    expect(result).toMatchObject({ delivered: false, attempts: 3, status: 429 });
    expect(receiver.received).toHaveLength(3);
  });

  it('410 stops at once; other 4xx are not retried', async () => {
    script = () => ({ status: 410 });
    const gone = await sender().deliver(`${receiver.url}/cb`, execution());
    expect(gone).toMatchObject({ delivered: false, attempts: 1, status: 410 });
    expect(gone.reason).toMatch(/410/);
    script = () => ({ status: 400 });
    const bad = await sender().deliver(`${receiver.url}/cb`, execution());
    expect(bad).toMatchObject({ delivered: false, attempts: 1, status: 400 });
  });

  it('a redirect is not followed and not retried', async () => {
    script = () => ({ status: 307, headers: { location: 'http://169.254.169.254/' } });
    const result = await sender().deliver(`${receiver.url}/cb`, execution());
    expect(result).toMatchObject({ delivered: false, attempts: 1, status: 307 });
    expect(receiver.received).toHaveLength(1);
  });

  it('a 2xx is delivered whatever its body: a large one, or one still coming, is not waited for', async () => {
    script = () => ({ status: 200, body: 'x'.repeat(256 * 1024) });
    const large = await sender().deliver(`${receiver.url}/cb`, execution());
    expect(large).toEqual({ delivered: true, webhookId: 'msg_exec-1', attempts: 1, status: 200 });
    expect(receiver.received).toHaveLength(1);
    // Headers at once, then a body that never ends.
    const dripping = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-length': '1000' });
        res.write('x');
      });
    });
    await new Promise<void>((resolve) => dripping.listen(0, '127.0.0.1', resolve));
    const { port } = dripping.address() as AddressInfo;
    try {
      const s = sender({ guard: { allow: [`127.0.0.1:${port}`] }, timeoutMs: 300 });
      const slow = await s.deliver(`http://127.0.0.1:${port}/cb`, execution());
      expect(slow).toEqual({ delivered: true, webhookId: 'msg_exec-1', attempts: 1, status: 200 });
    } finally {
      dripping.closeAllConnections();
      await new Promise((resolve) => dripping.close(resolve));
    }
  });

  it('refuses a destination that is not allow-listed without sending anything', async () => {
    const s = new CallbackSender({ backoffMs: 1 });
    senders.push(s);
    const result = await s.deliver(`${receiver.url}/cb`, execution());
    expect(result.delivered).toBe(false);
    expect(result.attempts).toBe(1);
    expect(result.reason).toMatch(/scheme http: not allowed|not public/);
    expect(receiver.received).toHaveLength(0);
  });

  it('the engine posts the result after the execution finishes (Async Callback mode)', async () => {
    script = () => ({ status: 200 });
    const engine = new InProcessEngine({
      onInternalError: () => {},
      outbound: { allow: [`127.0.0.1:${receiver.port}`] },
      callbacks: { backoffMs: 1, timeoutMs: 2000 },
    });
    const url = `${receiver.url}/callback?token=abc`;
    engine.callbacks.validate(url);
    const started = await engine.start({
      workflow: workflow([
        { id: 'a', type: 'transform', expression: '{ "total": body.n * 10 }' },
        { id: 'f', type: 'if', condition: 'total > 50', then: 'boom' },
        { id: 'ok', type: 'transform', expression: '$', next: 'end' },
        { id: 'boom', type: 'fail', expression: '"too big"' },
        { id: 'end', type: 'transform', expression: '$' },
      ]),
      trigger: ref(),
      input: trigger({ n: 2 }),
      callbackUrl: url,
    });
    await finished(engine, started.id);
    const failing = await engine.start({
      workflow: workflow([{ id: 'boom', type: 'fail', expression: '"too big"', statusCode: 422 }]),
      trigger: ref(),
      input: trigger({ n: 9 }),
      callbackUrl: url,
    });
    await finished(engine, failing.id);
    await engine.close(5000); // waits for the deliveries too
    expect(receiver.received).toHaveLength(2);
    const bodies = receiver.received.map((r) => verify(engine.callbacks.secret, r) as CallbackBody);
    const ok = bodies.find((b) => b.executionId === started.id);
    const bad = bodies.find((b) => b.executionId === failing.id);
    expect(ok).toMatchObject({
      type: 'execution.completed',
      status: 'succeeded',
      output: { total: 20 },
    });
    expect(bad).toMatchObject({
      type: 'execution.failed',
      status: 'failed',
      error: { message: 'too big', nodeId: 'boom', statusCode: 422 },
    });
    expect(bad && 'output' in bad).toBe(false);
    expect(receiver.received[0]?.url).toBe('/callback?token=abc');
  });

  it("the trigger's own secrets sign after in-process retries and on a dead-letter retry (the route's then); never stored", async () => {
    script = () => ({ status: 200 });
    const own = { key: 'shop/own-hook', secrets: [generateSecret(), generateSecret(48)] };
    const rotated = [generateSecret()];
    const hooked: RouteRecord = {
      ...route(own.key),
      credentials: { callbackSecrets: own.secrets },
    };
    const retry = {
      attempts: 2,
      backoff: { initial: '20ms', max: '1s', multiplier: 1, jitter: 0 },
      on: ['fail'],
    } as RetryPolicy;
    const flaky = workflow(
      [
        { id: 'check', type: 'if', condition: '$millis() < $trigger.body.failUntil', else: 'ok' },
        { id: 'stop', type: 'fail', expression: '"not yet"', statusCode: 503 },
        { id: 'ok', type: 'transform', expression: '{ "done": true }' },
      ],
      { retry },
    );
    const engine = new InProcessEngine({
      onInternalError: () => {},
      outbound: { allow: [`127.0.0.1:${receiver.port}`] },
      callbacks: { backoffMs: 1, timeoutMs: 2000 },
    });
    const routes = new MemoryRecordStore<RouteRecord>();
    await routes.put(own.key, hooked);
    const { app } = createHttpApp({});
    recoveryRoutes(app, {
      engine,
      routes,
      workflow: (id) => (id === flaky.workflowId ? flaky : undefined),
      deadLetters: engine.deadLetters,
    });
    try {
      const url = `${receiver.url}/own`;
      const failUntil = Date.now() + 400;
      const started = await engine.start({
        workflow: flaky,
        trigger: triggerRef(hooked),
        input: trigger({ failUntil }),
        callbackUrl: url,
        ...callbackSigning(hooked),
      });
      const done = await finished(engine, started.id);
      expect(done.deadLetteredAt).toBeDefined();
      await eventually(() => expect(receiver.received).toHaveLength(1));
      const first = receiver.received[0] as Received;
      for (const secret of own.secrets) expect(verify(secret, first)).toBeTruthy();
      expect(() => verify(engine.callbacks.secret, first)).toThrow();

      // The Secret changed meanwhile: the retry signs with the route's secrets of now.
      await routes.put(own.key, { ...hooked, credentials: { callbackSecrets: rotated } });
      await new Promise((r) => setTimeout(r, Math.max(0, failUntil - Date.now()) + 20));
      const answer = await app.inject({
        method: 'POST',
        url: '/api/dead-letters/retry',
        payload: {},
      });
      const { executions } = answer.json<{ executions: { executionId: string }[] }>();
      expect(executions).toHaveLength(1);
      const again = await finished(engine, executions[0]?.executionId ?? '');
      expect(again.status).toBe('succeeded');
      await eventually(() => expect(receiver.received).toHaveLength(2));
      const second = receiver.received[1] as Received;
      expect(verify(rotated[0] as string, second)).toMatchObject({ status: 'succeeded' });
      expect(() => verify(own.secrets[0] as string, second)).toThrow();

      for (const id of [started.id, again.id]) {
        expect(credentialLeaks(await engine.get(id), [...own.secrets, ...rotated])).toEqual([]);
      }
    } finally {
      await app.close();
      await engine.close(5000);
    }
  });

  describe("an engine that reads the route at each attempt (ADR 0035: the route's secrets of then)", () => {
    const key = 'shop/rotating-hook';
    const record = (secrets: string[]): RouteRecord => ({
      ...route(key),
      credentials: { callbackSecrets: secrets },
    });
    const engines: InProcessEngine[] = [];
    afterEach(async () => {
      await Promise.all(engines.splice(0).map((e) => e.close(5000)));
    });
    function engineReading(
      routes: Pick<MemoryRecordStore<RouteRecord>, 'get'>,
      onInternalError: (error: unknown) => void = () => {},
    ): InProcessEngine {
      const engine = new InProcessEngine({
        onInternalError,
        outbound: { allow: [`127.0.0.1:${receiver.port}`] },
        callbacks: { backoffMs: 1, timeoutMs: 2000, maxAttempts: 3 },
        routes,
      });
      engines.push(engine);
      return engine;
    }
    /** Runs one execution whose trigger is `key`, as the gateway starts it; its callback outcome. */
    async function callbackOf(
      engine: InProcessEngine,
      routes: MemoryRecordStore<RouteRecord>,
    ): Promise<Execution> {
      const current = (await routes.get(key)) as RouteRecord;
      const started = await engine.start({
        workflow: workflow([{ id: 'a', type: 'transform', expression: '{ "ok": true }' }]),
        trigger: triggerRef(current),
        input: trigger({}),
        callbackUrl: `${receiver.url}/rotating`,
        ...callbackSigning(current),
      });
      return eventually(async () => {
        const done = await engine.get(started.id);
        expect(done?.callback).toBeDefined();
        return done as Execution;
      });
    }

    it('a Secret rotated between attempts: the overlap signs with both keys, then the new one alone', async () => {
      const old = generateSecret();
      const next = generateSecret(48);
      const routes = new MemoryRecordStore<RouteRecord>();
      await routes.put(key, record([old]));
      // The operator re-resolves the Secret while the receiver answers an attempt (503):
      // first the new key is added, then the old one removed.
      const rotations = [[old, next], [next]];
      script = async (_req, i) => {
        const secrets = rotations[i];
        if (!secrets) return { status: 200 };
        await routes.put(key, record(secrets));
        return { status: 503 };
      };
      const done = await callbackOf(engineReading(routes), routes);
      expect(done.callback).toEqual({ delivered: true, attempts: 3, status: 200 });
      const [first, overlap, last] = receiver.received as [Received, Received, Received];
      expect(receiver.received).toHaveLength(3);
      expect(verify(old, first)).toBeTruthy();
      expect(() => verify(next, first)).toThrow();
      expect(String(overlap.headers['webhook-signature']).split(' ')).toHaveLength(2);
      expect(verify(old, overlap)).toBeTruthy();
      expect(verify(next, overlap)).toBeTruthy();
      // A receiver that already dropped the old key accepts it; one holding only the old refuses.
      expect(verify(next, last)).toMatchObject({ status: 'succeeded', executionId: done.id });
      expect(() => verify(old, last)).toThrow();
      expect(credentialLeaks(done, [old, next])).toEqual([]);
    });

    it("a route without secrets of its own at an attempt: the engine's sign that attempt", async () => {
      const own = generateSecret();
      const routes = new MemoryRecordStore<RouteRecord>();
      await routes.put(key, record([own]));
      script = async (_req, i) => {
        if (i > 0) return { status: 200 };
        await routes.put(key, route(key)); // callbackSecretRef taken off the trigger
        return { status: 503 };
      };
      const engine = engineReading(routes);
      const done = await callbackOf(engine, routes);
      expect(done.callback).toEqual({ delivered: true, attempts: 2, status: 200 });
      const [first, second] = receiver.received as [Received, Received];
      expect(verify(own, first)).toBeTruthy();
      expect(verify(engine.callbacks.secret, second)).toBeTruthy();
      expect(() => verify(own, second)).toThrow();
    });

    /** The secret of a trigger created under the same name after the run's was deleted. */
    const newcomer = generateSecret();
    const RECREATED =
      'not signed: endpoint shop/rotating-hook was deleted and re-created since this run started (another WebhookTrigger uid)';
    const broken = [
      {
        what: 'the trigger deleted (its route gone)',
        change: (routes: MemoryRecordStore<RouteRecord>) => routes.delete(key),
        outcome: {
          delivered: false,
          attempts: 3,
          reason: 'not signed: endpoint shop/rotating-hook is no longer deployed',
        },
        internal: 0,
      },
      {
        what: 'the trigger deleted and re-created under its name, with secrets of its own (another uid)',
        change: (routes: MemoryRecordStore<RouteRecord>) =>
          routes.put(key, { ...record([newcomer]), uid: 'uid-2' }),
        outcome: { delivered: false, attempts: 3, reason: RECREATED },
        internal: 0,
      },
      {
        what: 'the trigger deleted and re-created under its name, without secrets of its own',
        change: (routes: MemoryRecordStore<RouteRecord>) =>
          routes.put(key, { ...route(key), uid: 'uid-2' }),
        outcome: { delivered: false, attempts: 3, reason: RECREATED },
        internal: 0,
      },
      {
        what: 'a secret on the route that cannot sign',
        change: (routes: MemoryRecordStore<RouteRecord>) =>
          routes.put(key, record(['whsec_not-a-secret'])),
        outcome: {
          delivered: false,
          attempts: 2,
          reason: 'a callback signing secret is not usable',
        },
        internal: 0,
      },
      {
        what: 'a route that cannot be read',
        change: (_routes: MemoryRecordStore<RouteRecord>, failing: { now: boolean }) => {
          failing.now = true;
          return Promise.resolve();
        },
        outcome: {
          delivered: false,
          attempts: 3,
          reason: 'not signed: the route of endpoint shop/rotating-hook could not be read',
        },
        internal: 2,
      },
    ];
    for (const { what, change, outcome, internal } of broken) {
      it(`${what} at an attempt: that attempt sends nothing, the reason is recorded, no crash`, async () => {
        const routes = new MemoryRecordStore<RouteRecord>();
        await routes.put(key, record([generateSecret()]));
        const failing = { now: false };
        const reader = {
          get: (k: string) =>
            failing.now ? Promise.reject(new Error('store down')) : routes.get(k),
        };
        script = async () => {
          await change(routes, failing);
          return { status: 503 };
        };
        const errors: unknown[] = [];
        const done = await callbackOf(
          engineReading(reader, (error) => errors.push(error)),
          routes,
        );
        expect(done.callback).toEqual(outcome);
        expect(receiver.received).toHaveLength(1);
        expect(errors).toHaveLength(internal);
        expect(JSON.stringify(done)).not.toContain('not-a-secret');
        expect(credentialLeaks(done, [newcomer])).toEqual([]);
      });
    }

    for (const [what, change] of [
      ['deleted (its route gone)', (routes: MemoryRecordStore<RouteRecord>) => routes.delete(key)],
      [
        'another trigger of its name now, with secrets of its own (deleted and re-created: another uid)',
        (routes: MemoryRecordStore<RouteRecord>) =>
          routes.put(key, { ...record([newcomer]), uid: 'uid-2' }),
      ],
      [
        'unreadable',
        (_routes: MemoryRecordStore<RouteRecord>, failing: { now: boolean }) => {
          failing.now = true;
        },
      ],
    ] as const) {
      it(`a trigger without secrets of its own, its route ${what} at an attempt: the engine's still sign`, async () => {
        // Only a key of the trigger's own is one nobody may manage once its route is gone;
        // the engine's signed this endpoint's callbacks before and still does.
        const routes = new MemoryRecordStore<RouteRecord>();
        await routes.put(key, route(key));
        const failing = { now: false };
        const reader = {
          get: (k: string) =>
            failing.now ? Promise.reject(new Error('store down')) : routes.get(k),
        };
        script = async (_req, i) => {
          if (i > 0) return { status: 200 };
          await change(routes, failing);
          return { status: 503 };
        };
        const errors: unknown[] = [];
        const engine = engineReading(reader, (error) => errors.push(error));
        const done = await callbackOf(engine, routes);
        expect(done.callback).toEqual({ delivered: true, attempts: 2, status: 200 });
        const [first, second] = receiver.received as [Received, Received];
        expect(verify(engine.callbacks.secret, first)).toBeTruthy();
        expect(verify(engine.callbacks.secret, second)).toBeTruthy();
        // Never with the key of a trigger that is not this run's.
        expect(() => verify(newcomer, second)).toThrow();
        // A store that cannot be read is still ours to hear about.
        expect(errors).toHaveLength(what === 'unreadable' ? 1 : 0);
      });
    }

    it('a run from before uids were kept (its reference has none): the route of its name signs, as before', async () => {
      // An execution a previous version accepted, finished by this one (an upgrade with
      // runs in flight): nothing tells which trigger of that name it came in on.
      const routes = new MemoryRecordStore<RouteRecord>();
      await routes.put(key, record([generateSecret()]));
      script = async (_req, i) => {
        if (i > 0) return { status: 200 };
        await routes.put(key, { ...record([newcomer]), uid: 'uid-2' });
        return { status: 503 };
      };
      const engine = engineReading(routes);
      const current = (await routes.get(key)) as RouteRecord;
      const { uid: _uid, ...before } = triggerRef(current);
      const started = await engine.start({
        workflow: workflow([{ id: 'a', type: 'transform', expression: '{ "ok": true }' }]),
        trigger: before,
        input: trigger({}),
        callbackUrl: `${receiver.url}/before`,
        ...callbackSigning(current),
      });
      const done = await eventually(async () => {
        const found = await engine.get(started.id);
        expect(found?.callback).toBeDefined();
        return found as Execution;
      });
      expect(done).not.toHaveProperty('triggerUid');
      expect(done.callback).toEqual({ delivered: true, attempts: 2, status: 200 });
      expect(verify(newcomer, receiver.received[1] as Received)).toBeTruthy();
    });

    it('shutdown cancels an attempt waiting on a route read that does not answer', async () => {
      // A Redis Cluster that is down keeps a read in the client's offline queue with no
      // time limit: close(timeoutMs) must still end the delivery, not wait for Redis.
      const routes = new MemoryRecordStore<RouteRecord>();
      await routes.put(key, record([generateSecret()]));
      let asked = 0;
      const reader = {
        get: (k: string) => (++asked > 1 ? new Promise<never>(() => {}) : routes.get(k)),
      };
      script = () => ({ status: 503 });
      const engine = engineReading(reader);
      const current = (await routes.get(key)) as RouteRecord;
      const started = await engine.start({
        workflow: workflow([{ id: 'a', type: 'transform', expression: '{ "ok": true }' }]),
        trigger: triggerRef(current),
        input: trigger({}),
        callbackUrl: `${receiver.url}/stuck`,
        ...callbackSigning(current),
      });
      await eventually(() => expect(asked).toBe(2));
      engines.splice(engines.indexOf(engine), 1); // closed here, not after the test
      const closed = await Promise.race([
        engine.close(50).then(() => 'closed'),
        new Promise((resolve) => setTimeout(resolve, 3_000, 'still waiting')),
      ]);
      expect(closed).toBe('closed');
      expect((await engine.get(started.id))?.callback).toEqual({
        delivered: false,
        attempts: 2,
        reason: 'delivery cancelled (shutdown)',
      });
      expect(receiver.received).toHaveLength(1);
    });
  });

  it('a route secret that cannot sign is refused without sending and recorded, no crash', async () => {
    script = () => ({ status: 200 });
    const errors: unknown[] = [];
    const engine = new InProcessEngine({
      onInternalError: (error) => errors.push(error),
      outbound: { allow: [`127.0.0.1:${receiver.port}`] },
      callbacks: { backoffMs: 1, timeoutMs: 2000 },
    });
    const started = await engine.start({
      workflow: workflow([{ id: 'a', type: 'transform', expression: '{}' }]),
      trigger: ref(),
      input: trigger({}),
      callbackUrl: `${receiver.url}/bad`,
      callbackSecrets: ['whsec_not-a-secret'],
    });
    await finished(engine, started.id);
    await engine.close(5000);
    expect(receiver.received).toHaveLength(0);
    expect((await engine.get(started.id))?.callback).toMatchObject({
      delivered: false,
      attempts: 0,
      reason: 'a callback signing secret is not usable',
    });
    expect(JSON.stringify(await engine.get(started.id))).not.toContain('not-a-secret');
    expect(errors).toEqual([]);
  });
});
