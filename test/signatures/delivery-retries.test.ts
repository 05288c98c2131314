// A sender's retry of a signed delivery (the same delivery id) gets the first delivery's
// answer, or waits for the same execution: never a second run, never a 401 for a
// delivery that was accepted. The delivery id is the request's implicit idempotency key
// (runtime/gateway/idempotency/claims.ts, deliveryKey); the replay claim still refuses
// what the key does not know. Through the dev runtime, on the memory stores and on a
// real redis-server, with GitHub deliveries signed as GitHub does (and Stripe's, whose
// scheme has no delivery id: unchanged).
//
// Under the implicit key (not an explicit Idempotency-Key): a run that failed (5xx) is
// not kept, so the sender's retry runs the delivery again; and a retry that finds its
// execution succeeded and discarded (ADR 0041) gets 202 succeeded, never 410 (which a
// Standard Webhooks sender takes as "disable this endpoint").
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROBLEM_BASE } from '../../runtime/errors.ts';
import { deliveryKey } from '../../runtime/gateway/idempotency/claims.ts';
import { eventually, sleep } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { secret, workflow } from '../support/manifests.ts';
import { startReceiver } from '../support/receiver.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';
import { githubSignature, signedTrigger, stripeV1 } from './support.ts';

const GITHUB_SECRET = 'gh-delivery-secret-0123';
const STRIPE_SECRET = 'whsec_stripe_delivery_secret';
const SVIX_SECRET = `whsec_${randomBytes(24).toString('base64')}`;
const BASE = '/webhook/default_production_';

type Res = Awaited<ReturnType<TestRuntime['app']['inject']>>;

/**
 * A receiver that answers 400 to the first call of each delivery (its `n`) (the http node fails: the
 * run fails), 200 to the next ones: a cause that is gone on the sender's retry.
 */
const flakyReceiver = () => {
  const seen = new Set<number | undefined>();
  return startReceiver((r) => {
    const n = (JSON.parse(r.body) as { body?: { n?: number } }).body?.n;
    if (r.url !== '/flaky' || seen.has(n)) return 200;
    seen.add(n);
    return 400;
  });
};
type Receiver = Awaited<ReturnType<typeof startReceiver>>;

/** Signed as GitHub signs, with the secret of Secret github-hook. */
const GITHUB = { preset: 'github', secretRef: { name: 'github-hook' } } as const;

function docs(receiverUrl = 'http://127.0.0.1:9') {
  return [
    secret('github-hook', { current: GITHUB_SECRET }),
    secret('stripe-hook', { endpoint: STRIPE_SECRET }),
    secret('svix-hook', { endpoint: SVIX_SECRET }),
    workflow('flaky', {
      nodes: [
        { id: 'call', type: 'http', request: { method: 'POST', url: `${receiverUrl}/flaky` } },
        { id: 'out', type: 'transform', expression: '{ "done": $trigger.body.n }' },
        { id: 'answer', type: 'respond', statusCode: 200, expression: '$' },
      ],
    }),
    workflow('slowflaky', {
      nodes: [
        { id: 'pause', type: 'delay', duration: '1600ms' },
        { id: 'call', type: 'http', request: { method: 'POST', url: `${receiverUrl}/flaky` } },
        { id: 'out', type: 'transform', expression: '{ "done": $trigger.body.n }' },
      ],
    }),
    workflow('slowgone', {
      nodes: [
        { id: 'pause', type: 'delay', duration: '1600ms' },
        { id: 'call', type: 'http', request: { method: 'POST', url: `${receiverUrl}/counted` } },
      ],
      executionRecords: { succeeded: 'Discard' },
    }),
    signedTrigger('flakywait', 'flaky', GITHUB, {
      timeout: '5s',
      response: { mode: 'waitForCompletion' },
    }),
    signedTrigger('flakynode', 'flaky', GITHUB, {
      timeout: '5s',
      response: { mode: 'waitForResponseNode' },
    }),
    signedTrigger('slowflaky', 'slowflaky', GITHUB, {
      timeout: '1s',
      response: { mode: 'waitForCompletion' },
    }),
    signedTrigger(
      'svixwait',
      'slowgone',
      { preset: 'standardWebhooks', secretRef: { name: 'svix-hook' } },
      { timeout: '1s', response: { mode: 'waitForCompletion' } },
    ),
    workflow('echo', {
      nodes: [{ id: 'out', type: 'transform', expression: '{ "got": body }' }],
    }),
    workflow('slow', {
      nodes: [
        { id: 'pause', type: 'delay', duration: '1600ms' },
        { id: 'out', type: 'transform', expression: '{ "done": body.n }' },
      ],
    }),
    signedTrigger('ack', 'echo', GITHUB, { response: { mode: 'immediateAck' } }),
    signedTrigger('wait', 'slow', GITHUB, {
      timeout: '1s',
      response: { mode: 'waitForCompletion' },
    }),
    signedTrigger(
      'stripe',
      'echo',
      { preset: 'stripe', secretRef: { name: 'stripe-hook' } },
      { response: { mode: 'immediateAck' } },
    ),
  ];
}

const github = (id: string, raw: string, extra: Record<string, string> = {}) => ({
  'content-type': 'application/json',
  'x-hub-signature-256': githubSignature(GITHUB_SECRET, raw),
  'x-github-delivery': id,
  ...extra,
});

const svix = (id: string, raw: string, extra: Record<string, string> = {}) => {
  const now = new Date();
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
    'webhook-signature': new Webhook(SVIX_SECRET).sign(id, now, raw),
    ...extra,
  };
};

const TRIGGERS = ['ack', 'wait', 'stripe', 'flakywait', 'flakynode', 'slowflaky', 'svixwait'];

function expectReplayed(res: Res, detail?: RegExp): void {
  expect(res.statusCode, res.body).toBe(401);
  const body = res.json<{ type: string; detail: string }>();
  expect(body.type).toBe(`${PROBLEM_BASE}signature-replayed`);
  if (detail) expect(body.detail).toMatch(detail);
}

function suite(
  name: string,
  start: (allow: string) => Promise<TestRuntime>,
  stop?: () => Promise<void>,
) {
  describe(name, () => {
    let rt: TestRuntime;
    let receiver: Receiver;
    let run = 0;
    /** A delivery id of this run (the Redis suite keeps nothing between runs anyway). */
    const id = (label: string) => `${label}-${name.replace(/\W/g, '')}-${++run}-${Date.now()}`;
    const post = (path: string, headers: Record<string, string>, payload: string) =>
      rt.app.inject({ method: 'POST', url: `${BASE}${path}`, headers, payload });
    const executions = async (triggerKey: string, match: (body: unknown) => boolean) =>
      (await rt.engine.list({ triggerKey, limit: 100 })).filter((e) => match(e.input.body));

    beforeAll(async () => {
      receiver = await flakyReceiver();
      rt = await start(`127.0.0.1:${receiver.port}`);
      await rt.apply('deliveries.yaml', docs(receiver.url), TRIGGERS);
    }, 60_000);
    afterAll(async () => {
      await rt?.stop();
      await stop?.();
      await receiver?.close();
    });

    it('the same delivery after a 202: the stored 202 again (same executionId), one run', async () => {
      const delivery = id('gh-ack');
      const raw = JSON.stringify({ delivery });
      const first = await post('echo/ack', github(delivery, raw), raw);
      expect(first.statusCode, first.body).toBe(202);
      const retry = await post('echo/ack', github(delivery, raw), raw);
      expect(retry.statusCode, retry.body).toBe(202);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.json<{ executionId: string }>().executionId).toBe(
        first.json<{ executionId: string }>().executionId,
      );
      const runs = await executions(
        'default/ack',
        (b) => (b as { delivery?: string }).delivery === delivery,
      );
      expect(runs).toHaveLength(1);
    });

    it('a 408 (the workflow outlasts the timeout): the retry waits for the same execution', async () => {
      const delivery = id('gh-wait');
      const n = Date.now();
      const raw = JSON.stringify({ n });
      const first = await post('slow/wait', github(delivery, raw), raw);
      expect(first.statusCode, first.body).toBe(408);
      const executionId = first.json<{ executionId: string }>().executionId;
      // The sender's retry: not a second run, not a 401; it waits for that execution.
      const retry = await post('slow/wait', github(delivery, raw), raw);
      expect(retry.statusCode, retry.body).toBe(200);
      expect(retry.json()).toEqual({ done: n });
      // Once it has an answer, that answer is the delivery's.
      const later = await post('slow/wait', github(delivery, raw), raw);
      expect(later.statusCode, later.body).toBe(200);
      expect(later.headers['idempotent-replayed']).toBe('true');
      const runs = await executions('default/wait', (b) => (b as { n?: number }).n === n);
      expect(runs.map((r) => [r.id, r.status])).toEqual([[executionId, 'succeeded']]);
    });

    it('the same delivery id with another body (validly signed): refused, nothing runs', async () => {
      const delivery = id('gh-other');
      const raw = JSON.stringify({ delivery, v: 1 });
      expect((await post('echo/ack', github(delivery, raw), raw)).statusCode).toBe(202);
      const other = JSON.stringify({ delivery, v: 2 });
      const res = await post('echo/ack', github(delivery, other), other);
      expectReplayed(res, /different body/);
      const runs = await executions(
        'default/ack',
        (b) => (b as { delivery?: string }).delivery === delivery,
      );
      expect(runs.map((r) => (r.input.body as { v: number }).v)).toEqual([1]);
    });

    it('after a 408 too: the same id with another body is refused, only the first runs', async () => {
      const delivery = id('gh-408-other');
      const n = Date.now();
      const raw = JSON.stringify({ n });
      expect((await post('slow/wait', github(delivery, raw), raw)).statusCode).toBe(408);
      const other = JSON.stringify({ n, other: true });
      expectReplayed(await post('slow/wait', github(delivery, other), other), /different body/);
      const runs = await executions('default/wait', (b) => (b as { n?: number }).n === n);
      expect(runs).toHaveLength(1);
    });

    it('a scheme without a delivery id (stripe): a replay is still a 401, one run', async () => {
      const raw = JSON.stringify({ id: id('evt') });
      const t = Math.floor(Date.now() / 1000);
      const headers = {
        'content-type': 'application/json',
        'stripe-signature': `t=${t},v1=${stripeV1(STRIPE_SECRET, t, raw)}`,
      };
      expect((await post('echo/stripe', headers, raw)).statusCode).toBe(202);
      expectReplayed(await post('echo/stripe', headers, raw), /already accepted/);
      const runs = await executions('default/stripe', (b) => JSON.stringify(b) === raw);
      expect(runs).toHaveLength(1);
    });

    it('an explicit Idempotency-Key wins: its answer is replayed; the id alone runs nothing', async () => {
      const delivery = id('gh-keyed');
      const raw = JSON.stringify({ delivery });
      const keyed = github(delivery, raw, { 'idempotency-key': `key-${delivery}` });
      const first = await post('echo/ack', keyed, raw);
      expect(first.statusCode, first.body).toBe(202);
      const retry = await post('echo/ack', keyed, raw);
      expect(retry.statusCode, retry.body).toBe(202);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.json()).toEqual(first.json());
      // The answer is the explicit key's: the same delivery under another key, or under
      // none, finds no answer of its own, and its replay claim refuses it.
      const otherKey = github(delivery, raw, { 'idempotency-key': `other-${delivery}` });
      expectReplayed(await post('echo/ack', otherKey, raw));
      expectReplayed(await post('echo/ack', github(delivery, raw), raw));
      const runs = await executions(
        'default/ack',
        (b) => (b as { delivery?: string }).delivery === delivery,
      );
      expect(runs).toHaveLength(1);
    });

    it('copies of one delivery at once: one run; the others get its answer or 409', async () => {
      const delivery = id('gh-burst');
      const raw = JSON.stringify({ delivery });
      const answers = await Promise.all(
        Array.from({ length: 10 }, () => post('echo/ack', github(delivery, raw), raw)),
      );
      for (const a of answers) expect([202, 409], a.body).toContain(a.statusCode);
      const ids = new Set(
        answers
          .filter((a) => a.statusCode === 202)
          .map((a) => a.json<{ executionId: string }>().executionId),
      );
      expect(ids.size).toBe(1);
      const runs = await executions(
        'default/ack',
        (b) => (b as { delivery?: string }).delivery === delivery,
      );
      expect(runs).toHaveLength(1);
    });

    for (const [segment, mode] of [
      ['flakywait', 'Wait for Completion'],
      ['flakynode', 'Wait for Response Node'],
    ] as const)
      it(`${mode}: a run that failed (5xx) is not kept; the retry runs the delivery again and succeeds`, async () => {
        const delivery = id(`gh-${segment}`);
        const n = Date.now();
        const raw = JSON.stringify({ n });
        const first = await post(`flaky/${segment}`, github(delivery, raw), raw);
        expect(first.statusCode, first.body).toBeGreaterThanOrEqual(500);
        // The sender's retry: a second run (the cause is gone), not the stored 5xx.
        const retry = await post(`flaky/${segment}`, github(delivery, raw), raw);
        expect(retry.statusCode, retry.body).toBe(200);
        expect(retry.headers['idempotent-replayed']).toBeUndefined();
        expect(retry.json()).toEqual({ done: n });
        // That success is the delivery's answer now.
        const later = await post(`flaky/${segment}`, github(delivery, raw), raw);
        expect(later.statusCode, later.body).toBe(200);
        expect(later.headers['idempotent-replayed']).toBe('true');
        const runs = await executions(`default/${segment}`, (b) => (b as { n?: number }).n === n);
        expect(runs.map((r) => r.status).sort()).toEqual(['failed', 'succeeded']);
      });

    it('a 408, then the retry that waited for it gets its failure: the next retry runs again, not a 401', async () => {
      const delivery = id('gh-slowflaky');
      const n = Date.now();
      const raw = JSON.stringify({ n });
      const send = () => post('slowflaky/slowflaky', github(delivery, raw), raw);
      expect((await send()).statusCode).toBe(408);
      // Resumes the first execution (which kept the replay claim) and gets its failure.
      const resumed = await send();
      expect(resumed.statusCode, resumed.body).toBe(500);
      // The claim the first request took is freed with the key: a new run (408 again: slow).
      const again = await send();
      expect(again.statusCode, again.body).toBe(408);
      const last = await send();
      expect(last.statusCode, last.body).toBe(200);
      expect(last.json()).toEqual({ done: n });
      const runs = await executions('default/slowflaky', (b) => (b as { n?: number }).n === n);
      expect(runs.map((r) => r.status).sort()).toEqual(['failed', 'succeeded']);
    });

    it("an explicit Idempotency-Key keeps the failed run's 5xx: its retry gets it again, one run", async () => {
      const delivery = id('gh-flaky-keyed');
      const n = Date.now();
      const raw = JSON.stringify({ n });
      const keyed = github(delivery, raw, { 'idempotency-key': `key-${delivery}` });
      const first = await post('flaky/flakywait', keyed, raw);
      expect(first.statusCode, first.body).toBeGreaterThanOrEqual(500);
      const retry = await post('flaky/flakywait', keyed, raw);
      expect(retry.statusCode, retry.body).toBe(first.statusCode);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      const runs = await executions('default/flakywait', (b) => (b as { n?: number }).n === n);
      expect(runs.map((r) => r.status)).toEqual(['failed']);
    });

    /** A first Standard Webhooks delivery answered 408; resolves once its run succeeded and was discarded. */
    async function timedOutThenDiscarded(
      headers: (raw: string) => Record<string, string>,
      n: number,
    ): Promise<string> {
      const raw = JSON.stringify({ n });
      const first = await post('slowgone/svixwait', headers(raw), raw);
      expect(first.statusCode, first.body).toBe(408);
      const executionId = first.json<{ executionId: string }>().executionId;
      await eventually(
        async () => expect(await rt.engine.get(executionId)).toBeUndefined(),
        10_000,
      );
      return executionId;
    }

    it('Standard Webhooks, Wait for Completion, a discarded success: the retry gets 202 succeeded, not 410; one run', async () => {
      const delivery = `msg_${id('discarded')}`;
      const n = Date.now();
      const raw = JSON.stringify({ n });
      const executionId = await timedOutThenDiscarded((r) => svix(delivery, r), n);
      const retry = await post('slowgone/svixwait', svix(delivery, raw), raw);
      expect(retry.statusCode, retry.body).toBe(202);
      expect(retry.json()).toMatchObject({ executionId, status: 'succeeded' });
      // The key keeps that answer.
      const later = await post('slowgone/svixwait', svix(delivery, raw), raw);
      expect(later.statusCode, later.body).toBe(202);
      expect(later.headers['idempotent-replayed']).toBe('true');
      // It ran once: the receiver counted one call of it, and nothing is queued again.
      await sleep(300);
      const calls = receiver.received.filter(
        (r) =>
          r.url === '/counted' && (JSON.parse(r.body) as { body?: { n?: number } }).body?.n === n,
      );
      expect(calls).toHaveLength(1);
    });

    it('Standard Webhooks with an explicit Idempotency-Key: the discarded success still answers 410', async () => {
      const delivery = `msg_${id('discarded-keyed')}`;
      const n = Date.now();
      const raw = JSON.stringify({ n });
      const key = { 'idempotency-key': `key-${delivery}` };
      await timedOutThenDiscarded((r) => svix(delivery, r, key), n);
      const retry = await post('slowgone/svixwait', svix(delivery, raw, key), raw);
      expect(retry.statusCode, retry.body).toBe(410);
      expect(retry.json<{ type: string }>().type).toBe(`${PROBLEM_BASE}execution-discarded`);
    });
  });
}

suite('memory stores', (allow) => startRuntime({ engine: { outbound: { allow: [allow] } } }));

describe.skipIf(!redisAvailable())('Redis stores', () => {
  let server: RedisServer;
  const clients: Redis[] = [];
  suite(
    'redis',
    async (allow) => {
      server = await startRedis();
      const redis = new Redis(server.url);
      clients.push(redis);
      return startRuntime({ redis, engine: { outbound: { allow: [allow] } } });
    },
    async () => {
      for (const c of clients) c.disconnect();
      await server?.stop();
    },
  );
});

describe('a full memory idempotency store', () => {
  let rt: TestRuntime;
  beforeAll(async () => {
    // A byte budget this small keeps one key: every new delivery drops the one before.
    rt = await startRuntime({ budgets: { idempotencyBytes: 1 } });
    await rt.apply('deliveries.yaml', docs(), ['ack']);
  });
  afterAll(() => rt?.stop());

  it('a delivery whose key was dropped: the replay claim still refuses it (401), no second run', async () => {
    const post = (delivery: string, raw: string) =>
      rt.app.inject({
        method: 'POST',
        url: `${BASE}echo/ack`,
        headers: github(delivery, raw),
        payload: raw,
      });
    const a = JSON.stringify({ delivery: 'full-a' });
    const b = JSON.stringify({ delivery: 'full-b' });
    expect((await post('full-a', a)).statusCode).toBe(202);
    expect((await post('full-b', b)).statusCode).toBe(202);
    expectReplayed(await post('full-a', a));
    const runs = (await rt.engine.list({ triggerKey: 'default/ack', limit: 100 })).filter(
      (e) => (e.input.body as { delivery?: string }).delivery === 'full-a',
    );
    expect(runs).toHaveLength(1);
  });
});

describe('the implicit key', () => {
  it('is the preset and the percent-encoded id; a long id by its SHA-256', () => {
    expect(deliveryKey({ scheme: 'github', id: 'a1b2-c3' })).toBe('signature:github:a1b2-c3');
    expect(deliveryKey({ scheme: 'generic', id: 'x y:{z}#' })).toBe(
      'signature:generic:x%20y%3A%7Bz%7D%23',
    );
    const long = deliveryKey({ scheme: 'shopify', id: 'i'.repeat(201) });
    expect(long).toMatch(/^signature:shopify#[0-9a-f]{64}$/);
  });
});
