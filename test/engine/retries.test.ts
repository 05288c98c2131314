// Execution-level retries in the in-process engine (embedded mode): a workflow's
// spec.retry runs it again after a failure of a class it names, with backoff and
// jitter; each attempt is in the log and the events; exhausted executions go to the
// dead-letter list; other failures end the execution at once.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RetryPolicy, WorkflowNode } from '../../api/v1alpha1/workflow.ts';
import type { RouteRecord } from '../../api/records/records.ts';
import { MemoryRecordStore } from '../../api/records/memory-store.ts';
import { MemoryDeadLetterStore } from '../../runtime/engine/dead-letters.ts';
import { InProcessEngine, type EngineObserver } from '../../runtime/engine/engine.ts';
import { MemoryExecutionStore } from '../../runtime/engine/execution-store.ts';
import { createHttpApp } from '../../runtime/http-app.ts';
import { executionRoutes } from '../../runtime/read-api/execution-routes.ts';
import { recoveryRoutes } from '../../runtime/read-api/recovery-routes.ts';
import type { Execution, SequencedEvent } from '../../runtime/engine/ports.ts';
import { nextAttempt, resolveRetryPolicy, retryDelay } from '../../runtime/engine/retry-policy.ts';
import { eventually } from '../support/eventually.ts';
import { finished, ref, route, trigger, workflow } from './helpers.ts';
import { startReceiver, type Receiver } from './receiver.ts';
import { expectLifetimeFromDeadLettering } from './dead-letter-lifetime.ts';

describe('retry policy: waits', () => {
  const policy = resolveRetryPolicy({
    attempts: 10,
    backoff: { initial: '100ms', max: '1s', multiplier: 3, jitter: 0.25 },
  });

  it('grows by the multiplier from initial, capped at max', () => {
    const none = () => 0; // no jitter drawn: the computed wait itself
    expect([1, 2, 3, 4, 5].map((n) => retryDelay(policy, n, none))).toEqual([
      100, 300, 900, 1000, 1000,
    ]);
  });

  it('jitter takes at most its share off each wait, and nothing is ever added', () => {
    for (let failed = 1; failed <= 6; failed++) {
      const wait = Math.min(1000, 100 * 3 ** (failed - 1));
      expect(retryDelay(policy, failed, () => 0.999_999)).toBe(Math.round(wait * 0.75));
      for (let i = 0; i < 200; i++) {
        const d = retryDelay(policy, failed);
        expect(d).toBeGreaterThanOrEqual(Math.floor(wait * 0.75));
        expect(d).toBeLessThanOrEqual(wait);
      }
    }
  });

  it('retries only the classes named (default: timeout, network, http5xx, http429), until the last attempt', () => {
    const p: RetryPolicy = { attempts: 3 };
    expect(nextAttempt(p, 'http5xx', 1)).toBeDefined();
    expect(nextAttempt(p, 'http5xx', 2)).toBeDefined();
    expect(nextAttempt(p, 'http5xx', 3)).toBeUndefined();
    expect(nextAttempt(p, 'nodeError', 1)).toBeUndefined();
    expect(nextAttempt(p, 'http4xx', 1)).toBeUndefined();
    expect(nextAttempt({ attempts: 3, on: ['nodeError'] }, 'nodeError', 1)).toBeDefined();
    // Never, whatever the policy says: validation and workflow faults.
    for (const kind of ['validation', 'workflow', 'refused', 'shutdown', 'internal'] as const)
      expect(nextAttempt({ attempts: 5, on: ['nodeError', 'fail'] }, kind, 1)).toBeUndefined();
  });
});

describe('InProcessEngine: execution retries', () => {
  let receiver: Receiver;
  /** How the receiver answers the nth request (0-based) of the current test. */
  let answers: number[] = [];
  const engines: InProcessEngine[] = [];

  beforeAll(async () => {
    receiver = await startReceiver((_req, index) => ({
      status: answers[index] ?? answers.at(-1) ?? 200,
      headers: { 'content-type': 'application/json' },
      body: '{"ok":true}',
    }));
  });
  afterAll(() => receiver.close());
  afterEach(async () => {
    await Promise.all(engines.splice(0).map((e) => e.close(1_000)));
    receiver.received.length = 0;
  });

  const calls: string[] = [];
  const observer: EngineObserver = {
    executionFinished: (e) => calls.push(`finished:${e.status}`),
    callbackDelivered: () => {},
    attemptRetried: (e) => calls.push(`retried:${e.attempt ?? 1}`),
    deadLettered: (e) => calls.push(`dead:${e.id}`),
  };

  function engine(deadLetters = new MemoryDeadLetterStore()): InProcessEngine {
    const e = new InProcessEngine({
      onInternalError: () => {},
      outbound: { allow: [`127.0.0.1:${receiver.port}`] },
      deadLetters,
      observer,
    });
    engines.push(e);
    return e;
  }

  const callNode = (): Partial<WorkflowNode> => ({
    id: 'call',
    type: 'http',
    request: { method: 'POST', url: `${receiver.url}/orders`, timeout: '2s', retries: 0 },
  });
  const fast: RetryPolicy = {
    attempts: 3,
    backoff: { initial: '20ms', max: '50ms', multiplier: 2, jitter: 0.5 },
  };

  async function runWith(
    e: InProcessEngine,
    nodes: Partial<WorkflowNode>[],
    retry: RetryPolicy | undefined,
  ): Promise<{ execution: Execution; events: SequencedEvent[] }> {
    const started = await e.start({
      workflow: workflow(nodes, retry ? { retry } : {}),
      trigger: ref(),
      input: trigger({ orderId: 7 }),
    });
    const events: SequencedEvent[] = [];
    e.subscribe(started.id, 0, (event) => events.push(event));
    const execution = await finished(e, started.id);
    return { execution, events };
  }

  it('a 503 then a 200: the second attempt succeeds; both attempts are in the log and the events', async () => {
    answers = [503, 200];
    calls.length = 0;
    const { execution, events } = await runWith(engine(), [callNode()], fast);
    expect(execution.status).toBe('succeeded');
    expect(receiver.received).toHaveLength(2);
    expect(execution.attempt).toBe(2);
    expect(execution.log.map((l) => [l.attempt, l.nodeId, l.status])).toEqual([
      [1, 'call', 'failed'],
      [2, 'call', 'succeeded'],
    ]);
    expect(execution.failedAttempts).toEqual([
      expect.objectContaining({
        attempt: 1,
        error: expect.objectContaining({ kind: 'http5xx', nodeId: 'call' }),
      }),
    ]);
    expect(execution.nextAttemptAt).toBeUndefined();
    expect(events.map((e) => e.type)).toEqual([
      'queued',
      'node.started',
      'node.finished',
      'attempt.failed',
      'attempt.started',
      'node.started',
      'node.finished',
      'completed',
    ]);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    const failedAttempt = events.find((e) => e.type === 'attempt.failed');
    expect(failedAttempt).toMatchObject({ attempt: 1, error: { kind: 'http5xx' } });
    // The wait is within the policy's bounds: 20 ms, at most half of it taken off.
    const retryInMs = (failedAttempt as { retryInMs: number }).retryInMs;
    expect(retryInMs).toBeGreaterThanOrEqual(10);
    expect(retryInMs).toBeLessThanOrEqual(20);
    await eventually(() => expect(calls).toEqual(['retried:1', 'finished:succeeded']));
  });

  it('exhausted: the execution fails after its last attempt and lands in the dead-letter list once', async () => {
    answers = [500];
    calls.length = 0;
    const deadLetters = new MemoryDeadLetterStore();
    const { execution, events } = await runWith(engine(deadLetters), [callNode()], fast);
    expect(execution.status).toBe('failed');
    expect(receiver.received).toHaveLength(3);
    expect(execution.attempt).toBe(3);
    expect(execution.deadLetteredAt).toBeDefined();
    expect(execution.error).toMatchObject({ kind: 'http5xx', nodeId: 'call' });
    expect(events.at(-1)).toMatchObject({ type: 'failed', deadLettered: true });
    expect(events.filter((e) => e.type === 'attempt.failed').map((e) => e.seq)).toHaveLength(2);
    await eventually(async () => expect(await deadLetters.count()).toBe(1));
    expect(await deadLetters.list({})).toEqual([
      expect.objectContaining({
        executionId: execution.id,
        triggerKey: 'shop/orders-hook',
        namespace: 'shop',
        attempts: 3,
        error: expect.objectContaining({ kind: 'http5xx' }),
      }),
    ]);
    await eventually(() =>
      expect(calls).toEqual(['retried:1', 'retried:2', `dead:${execution.id}`, 'finished:failed']),
    );
  });

  it('a failure the policy does not name is not retried and not dead-lettered', async () => {
    answers = [400];
    const deadLetters = new MemoryDeadLetterStore();
    const { execution, events } = await runWith(engine(deadLetters), [callNode()], fast);
    expect(execution.status).toBe('failed');
    expect(receiver.received).toHaveLength(1);
    expect(execution.error?.kind).toBe('http4xx');
    expect(execution.deadLetteredAt).toBeUndefined();
    expect(events.some((e) => e.type === 'attempt.failed')).toBe(false);
    expect(await deadLetters.count()).toBe(0);
  });

  it('a validation failure (the output schema) is never retried, even with every class named', async () => {
    const e = engine();
    const started = await e.start({
      workflow: workflow([{ id: 'a', type: 'transform', expression: '{ "n": 1 }' }], {
        retry: {
          ...fast,
          on: ['timeout', 'network', 'http5xx', 'http429', 'http4xx', 'nodeError', 'fail'],
        },
      }),
      trigger: ref(),
      input: trigger({}),
      outputValidator: () => ({ ok: false, errors: ['/n must be string'] }),
    });
    const execution = await finished(e, started.id);
    expect(execution.status).toBe('failed');
    expect(execution.error).toMatchObject({ code: 'HG_ERR_OUTPUT_SCHEMA', kind: 'validation' });
    expect(execution.attempt).toBeUndefined();
    expect(execution.log).toHaveLength(1);
  });

  it('a fail node retries only when `on` names fail', async () => {
    const failing = [{ id: 'stop', type: 'fail', expression: '"no"' }] as Partial<WorkflowNode>[];
    const plain = await runWith(engine(), failing, fast);
    expect(plain.execution.log).toHaveLength(1);
    const named = await runWith(engine(), failing, { ...fast, on: ['fail'] });
    expect(named.execution.log.map((l) => l.attempt)).toEqual([1, 2, 3]);
    expect(named.execution.deadLetteredAt).toBeDefined();
  });

  it('without a retry policy nothing changes: one attempt, no attempt fields, no dead letter', async () => {
    answers = [503];
    const deadLetters = new MemoryDeadLetterStore();
    const { execution } = await runWith(engine(deadLetters), [callNode()], undefined);
    expect(execution.status).toBe('failed');
    expect(execution.attempt).toBeUndefined();
    expect(execution.log[0]?.attempt).toBeUndefined();
    expect(await deadLetters.count()).toBe(0);
  });

  it('while it waits for its next attempt the record says queued with nextAttemptAt; close() ends it', async () => {
    answers = [503];
    const e = engine();
    const started = await e.start({
      workflow: workflow([callNode()], {
        retry: { attempts: 2, backoff: { initial: '1m', max: '1m', multiplier: 2, jitter: 0 } },
      }),
      trigger: ref(),
      input: trigger({}),
    });
    let waiting: Execution | undefined;
    for (let i = 0; i < 200 && waiting?.nextAttemptAt === undefined; i++) {
      await new Promise((r) => setTimeout(r, 10));
      waiting = await e.get(started.id);
    }
    expect(waiting?.status).toBe('queued');
    expect(waiting?.failedAttempts?.map((a) => a.attempt)).toEqual([1]);
    expect(Date.parse(waiting?.nextAttemptAt ?? '') - Date.now()).toBeGreaterThan(50_000);
    expect(e.running).toBe(0);
    engines.splice(engines.indexOf(e), 1);
    await e.close(1_000);
    const closed = await e.get(started.id);
    expect(closed).toMatchObject({ status: 'failed', error: { kind: 'shutdown' } });
    expect(closed?.error?.message).toMatch(/before attempt 2/);
  });
});

describe('MemoryDeadLetterStore', () => {
  const entry = (id: string, triggerKey = 'shop/orders-hook') => ({
    executionId: id,
    triggerKey,
    namespace: triggerKey.split('/')[0] ?? '',
    workflowId: 'shop_development_orders',
    createdAt: new Date().toISOString(),
    deadLetteredAt: new Date().toISOString(),
    attempts: 3,
    error: { message: 'boom' },
  });

  it('is bounded (oldest out first) and expires entries', async () => {
    let now = 1_000_000;
    const store = new MemoryDeadLetterStore({ maxEntries: 2, ttlMs: 1000, now: () => now });
    await store.add(entry('a'));
    await store.add(entry('b'));
    await store.add(entry('c'));
    expect((await store.list({})).map((e) => e.executionId)).toEqual(['c', 'b']);
    now += 1001;
    expect(await store.count()).toBe(0);
  });

  it("an entry lives a lifetime from its execution's dead-lettering, however often it is added", async () => {
    const clock = { now: Date.parse('2026-11-28T12:00:00Z') };
    const store = new MemoryDeadLetterStore({ ttlMs: 1000, now: () => clock.now });
    await expectLifetimeFromDeadLettering(store, clock, (id, ms) => ({
      ...entry(id),
      deadLetteredAt: new Date(ms).toISOString(),
    }));
  });

  it('take hands an entry out once; filters by trigger and namespace', async () => {
    const store = new MemoryDeadLetterStore();
    await store.add(entry('a'));
    await store.add(entry('b', 'billing/invoices'));
    expect((await store.list({ namespace: 'billing' })).map((e) => e.executionId)).toEqual(['b']);
    expect(
      (await store.list({ triggerKey: 'shop/orders-hook' })).map((e) => e.executionId),
    ).toEqual(['a']);
    const [first, second] = await Promise.all([store.take('a'), store.take('a')]);
    expect([first?.entry.executionId, second]).toEqual(['a', undefined]);
    expect(await store.count()).toBe(1);
  });
});

describe('embedded stores: a dead-lettered execution while its entry is listed', () => {
  it('stays readable, with its events, listed and retryable after its lifetime from creation', async () => {
    // A lifetime of 2 s for both stores (as the roles make them), two attempts 2.5 s
    // apart: the execution is dead-lettered after its lifetime from creation.
    const ttlMs = 2_000;
    const store = new MemoryExecutionStore({ ttlMs });
    const deadLetters = new MemoryDeadLetterStore({ ttlMs });
    const engine = new InProcessEngine({ store, deadLetters, onInternalError: () => {} });
    const target = workflow(
      [
        { id: 'check', type: 'if', condition: '$millis() < $trigger.body.failUntil', else: 'ok' },
        { id: 'stop', type: 'fail', expression: '"not yet"', statusCode: 503 },
        { id: 'ok', type: 'transform', expression: '{ "done": true }' },
      ],
      {
        retry: {
          attempts: 2,
          backoff: { initial: '2500ms', max: '10s', multiplier: 1, jitter: 0 },
          on: ['fail'],
        },
      },
    );
    const routes = new MemoryRecordStore<RouteRecord>();
    await routes.put('shop/orders-hook', route());
    const { app } = createHttpApp({});
    executionRoutes(app, { engine });
    recoveryRoutes(app, {
      engine,
      routes,
      workflow: (id) => (id === target.workflowId ? target : undefined),
      deadLetters,
    });
    try {
      const started = await engine.start({
        workflow: target,
        trigger: ref(),
        input: trigger({ failUntil: Date.now() + 3_600_000 }),
      });
      const events: SequencedEvent[] = [];
      engine.subscribe(started.id, 0, (e) => events.push(e));
      await eventually(() => expect(events.at(-1)?.type).toBe('failed'), 10_000);
      expect(await deadLetters.get(started.id)).toBeDefined();
      const read = await app.inject({ method: 'GET', url: `/api/executions/${started.id}` });
      expect(read.statusCode, read.body).toBe(200);
      const dead = read.json<Execution>();
      expect(Date.parse(dead.deadLetteredAt ?? '') - Date.parse(dead.createdAt)).toBeGreaterThan(
        ttlMs,
      );
      expect((await store.events(started.id, 0)).at(-1)).toMatchObject({
        type: 'failed',
        deadLettered: true,
      });
      const listed = await app.inject({ method: 'GET', url: '/api/executions' });
      expect(listed.json<{ items: Execution[] }>().items.map((e) => e.id)).toEqual([started.id]);
      const retried = await app.inject({
        method: 'POST',
        url: `/api/dead-letters/${started.id}/retry`,
      });
      expect(retried.statusCode, retried.body).toBe(202);
      expect(retried.json()).toMatchObject({ replayOf: started.id });
    } finally {
      await engine.close(1_000);
      await app.close();
    }
  }, 15_000);
});
