// A Workflow that discards the records of its succeeded executions
// (spec.executionRecords.succeeded: Discard, ADR 0041), in the in-process engine
// (embedded mode): listeners get the end, the store keeps nothing of a success, a
// failure is kept; a callback keeps the record until its delivery is over; the final
// success of a retried execution takes its earlier attempts with it.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { WorkflowNode, WorkflowSpec } from '../../api/v1alpha1/workflow.ts';
import { InProcessEngine, type EngineObserver } from '../../runtime/engine/engine.ts';
import { MemoryExecutionStore } from '../../runtime/engine/execution-store.ts';
import type { Execution, SequencedEvent } from '../../runtime/engine/ports.ts';
import { eventually } from '../support/eventually.ts';
import { ref, trigger, workflow } from './helpers.ts';
import { startReceiver, type Receiver } from './receiver.ts';

const DISCARD: Partial<WorkflowSpec> = { executionRecords: { succeeded: 'Discard' } };

describe('InProcessEngine: executionRecords.succeeded Discard', () => {
  let receiver: Receiver;
  /** How the receiver answers the nth request (0-based) of the current test. */
  let answers: number[] = [];
  const engines: InProcessEngine[] = [];
  const told: string[] = [];
  const observer: EngineObserver = {
    executionFinished: (e) => told.push(`finished:${e.status}`),
    callbackDelivered: (r) => told.push(`callback:${r.delivered}`),
    executionDiscarded: (e) => told.push(`discarded:${e.id}`),
  };

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
    told.length = 0;
    answers = [];
  });

  function engine(store = new MemoryExecutionStore()): {
    engine: InProcessEngine;
    store: MemoryExecutionStore;
  } {
    const e = new InProcessEngine({
      store,
      onInternalError: () => {},
      outbound: { allow: [`127.0.0.1:${receiver.port}`] },
      callbacks: { backoffMs: 1, timeoutMs: 2000, maxAttempts: 2 },
      observer,
    });
    engines.push(e);
    return { engine: e, store };
  }

  const double: Partial<WorkflowNode>[] = [
    { id: 'a', type: 'transform', expression: '{ "total": body.n * 2 }' },
  ];

  /**
   * Starts `nodes` and collects its events from the start until the end, watched as a
   * gateway's waiting modes start theirs (StartRequest.watched) unless told otherwise.
   */
  async function runWith(
    e: InProcessEngine,
    nodes: Partial<WorkflowNode>[],
    extra: Partial<WorkflowSpec>,
    callbackUrl?: string,
    watched = true,
  ): Promise<{ id: string; events: SequencedEvent[] }> {
    const started = await e.start({
      workflow: workflow(nodes, extra),
      trigger: ref(),
      input: trigger({ n: 21 }),
      ...(callbackUrl ? { callbackUrl } : {}),
      ...(watched ? { watched: true as const } : {}),
    });
    const events: SequencedEvent[] = [];
    await new Promise<void>((resolve) => {
      e.subscribe(started.id, 0, (event) => {
        events.push(event);
        if (event.type === 'completed' || event.type === 'failed') resolve();
      });
    });
    return { id: started.id, events };
  }

  it('a success: listeners get its end, then neither the engine nor the store has it', async () => {
    const { engine: e, store } = engine();
    const { id, events } = await runWith(e, double, DISCARD);
    expect(events.at(-1)).toMatchObject({ type: 'completed', output: { total: 42 } });
    await eventually(() => expect(told).toEqual(['finished:succeeded', `discarded:${id}`]));
    expect(await e.get(id)).toBeUndefined();
    expect(await store.get(id)).toBeUndefined();
    expect(await e.list({})).toEqual([]);
    expect(store.stats()).toMatchObject({ entries: 0, bytes: 0 });
    // A listener that comes just after the end still gets it (the store's handover).
    const late: SequencedEvent[] = [];
    e.subscribe(id, 0, (event) => late.push(event));
    await eventually(() => expect(late.at(-1)).toMatchObject({ type: 'completed' }));
  });

  it('a discard the store failed is not counted as one', async () => {
    const failing = new (class extends MemoryExecutionStore {
      override discard(): Promise<void> {
        return Promise.reject(new Error('store away'));
      }
    })();
    const { engine: e } = engine(failing);
    const { id } = await runWith(e, double, DISCARD);
    await eventually(() => expect(told).toEqual(['finished:succeeded']));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(told).not.toContain(`discarded:${id}`);
  });

  it('a success nobody watches leaves nothing behind, not even its events for a while', async () => {
    const { engine: e, store } = engine();
    const started = await e.start({
      workflow: workflow(double, DISCARD),
      trigger: ref(),
      input: trigger({ n: 21 }),
    });
    await eventually(() => expect(told).toEqual(['finished:succeeded', `discarded:${started.id}`]));
    expect(await store.events(started.id, 0)).toEqual([]);
    const late: SequencedEvent[] = [];
    e.subscribe(started.id, 0, (event) => late.push(event));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(late).toEqual([]);
  });

  it('Keep (the default) and a failure under Discard keep their records', async () => {
    const { engine: e, store } = engine();
    const kept = await runWith(e, double, {});
    const failed = await runWith(e, [{ id: 'boom', type: 'fail', expression: '"no"' }], DISCARD);
    await eventually(() => expect(told).toEqual(['finished:succeeded', 'finished:failed']));
    expect(await store.get(kept.id)).toMatchObject({ status: 'succeeded' });
    expect(await store.get(failed.id)).toMatchObject({ status: 'failed' });
    expect((await store.events(failed.id, 0)).at(-1)).toMatchObject({ type: 'failed' });
    expect(store.stats().entries).toBe(2);
  });

  describe('Wait for Response Node (StartRequest.respondAwaited, ADR 0041 amended 2026-11-28 (day))', () => {
    const awaited = (nodes: Partial<WorkflowNode>[]) => ({
      workflow: workflow(nodes, DISCARD),
      trigger: ref(),
      input: trigger({ n: 21 }),
      watched: true as const,
      respondAwaited: true as const,
    });

    it('a success that ran no respond node (its caller got a 500) is kept', async () => {
      const { engine: e, store } = engine();
      const started = await e.start(awaited(double));
      await eventually(() => expect(told).toEqual(['finished:succeeded']));
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(told).not.toContain(`discarded:${started.id}`);
      expect(await store.get(started.id)).toMatchObject({
        status: 'succeeded',
        output: { total: 42 },
      });
      expect(await store.get(started.id)).not.toHaveProperty('response');
    });

    it('a success that ran one is discarded', async () => {
      const { engine: e, store } = engine();
      const started = await e.start(
        awaited([
          { id: 'answer', type: 'respond', statusCode: 201, expression: '{ "ok": true }' },
          { id: 'a', type: 'transform', expression: '{ "total": body.n * 2 }' },
        ]),
      );
      await eventually(() =>
        expect(told).toEqual(['finished:succeeded', `discarded:${started.id}`]),
      );
      expect(await store.get(started.id)).toBeUndefined();
    });
  });

  it('a retried execution whose last attempt succeeds is discarded with its failed attempts', async () => {
    answers = [503, 200];
    const { engine: e, store } = engine();
    const { id, events } = await runWith(
      e,
      [
        {
          id: 'call',
          type: 'http',
          request: { method: 'POST', url: `${receiver.url}/orders`, timeout: '2s', retries: 0 },
        },
      ],
      {
        ...DISCARD,
        retry: { attempts: 3, backoff: { initial: '10ms', max: '20ms', multiplier: 2, jitter: 0 } },
      },
    );
    expect(events.map((x) => x.type)).toContain('attempt.failed');
    expect(events.at(-1)).toMatchObject({ type: 'completed' });
    await eventually(() => expect(told).toContain(`discarded:${id}`));
    expect(await store.get(id)).toBeUndefined();
    expect(store.stats().entries).toBe(0);
  });

  it('a callback: the record stays until the delivery is over; delivered, it is discarded', async () => {
    // The receiver holds its answer until told, so the record can be read meanwhile.
    let release = (): void => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    const slow = await startReceiver(async () => {
      await held;
      return { status: 204 };
    });
    try {
      const e = new InProcessEngine({
        onInternalError: () => {},
        outbound: { allow: [`127.0.0.1:${slow.port}`] },
        callbacks: { backoffMs: 1, timeoutMs: 5000, maxAttempts: 1 },
        observer,
      });
      engines.push(e);
      const { id } = await runWith(e, double, DISCARD, `${slow.url}/cb`);
      await eventually(() => expect(slow.received).toHaveLength(1));
      expect(await e.get(id)).toMatchObject({ status: 'succeeded', output: { total: 42 } });
      expect(told).toEqual(['finished:succeeded']);
      release();
      await eventually(() =>
        expect(told).toEqual(['finished:succeeded', 'callback:true', `discarded:${id}`]),
      );
      expect(await e.get(id)).toBeUndefined();
      expect((e.store as MemoryExecutionStore).stats().entries).toBe(0);
    } finally {
      release();
      await slow.close();
    }
  });

  describe('with an Idempotency-Key (StartRequest.idempotencyWindowMs, ADR 0041 amended 2026-11-28 (night))', () => {
    const keyed = (nodes: Partial<WorkflowNode>[], extra: Partial<WorkflowSpec>, id: string) => ({
      workflow: workflow(nodes, extra),
      trigger: ref(),
      input: trigger({ n: 21 }, id),
      idempotencyWindowMs: 60_000,
    });
    /** The key's retry of a request that got no answer: the same id, from the key's hint. */
    const retry = (nodes: Partial<WorkflowNode>[], extra: Partial<WorkflowSpec>, id: string) => ({
      ...keyed(nodes, extra, id),
      hinted: true as const,
    });

    it('a success leaves a tombstone: a start of its id runs nothing and says so; the store shows no record', async () => {
      const { engine: e, store } = engine();
      await e.start(keyed(double, DISCARD, 'exec-keyed'));
      await eventually(() => expect(told).toEqual(['finished:succeeded', 'discarded:exec-keyed']));
      expect(await store.discarded('exec-keyed')).toEqual({
        status: 'succeeded',
        finishedAt: expect.any(String),
      });
      await expect(e.start(retry(double, DISCARD, 'exec-keyed'))).rejects.toMatchObject({
        code: 'HG_ERR_EXECUTION_DISCARDED',
        status: 410,
        extensions: { executionId: 'exec-keyed' },
      });
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(told).toEqual(['finished:succeeded', 'discarded:exec-keyed']);
      expect(await e.get('exec-keyed')).toBeUndefined();
      expect(await e.list({})).toEqual([]);
      expect(store.stats().entries).toBe(0);
    });

    it('without a key nothing is left, as before: a start of the id runs it', async () => {
      const { engine: e, store } = engine();
      const { idempotencyWindowMs: _none, ...plain } = keyed(double, DISCARD, 'exec-plain');
      await e.start(plain);
      await eventually(() => expect(told).toContain('discarded:exec-plain'));
      expect(await store.discarded('exec-plain')).toBeUndefined();
      expect(store.stats()).toMatchObject({ entries: 0, bytes: 0 });
    });

    it('Keep, and a failure under Discard: the record is kept, no tombstone, a start of the id answers it', async () => {
      const { engine: e, store } = engine();
      await e.start(keyed(double, {}, 'exec-kept'));
      await e.start(
        keyed([{ id: 'boom', type: 'fail', expression: '"no"' }], DISCARD, 'exec-failed'),
      );
      const both = ['finished:failed', 'finished:succeeded'];
      await eventually(() => expect([...told].sort()).toEqual(both));
      for (const [id, status] of [
        ['exec-kept', 'succeeded'],
        ['exec-failed', 'failed'],
      ] as const) {
        expect(await store.discarded(id)).toBeUndefined();
        expect(await e.start(retry(double, DISCARD, id))).toMatchObject({ id, status });
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect([...told].sort()).toEqual(both);
    });

    it('a callback: the tombstone is left once the delivery is over', async () => {
      const { engine: e, store } = engine();
      await e.start({
        ...keyed(double, DISCARD, 'exec-called'),
        callbackUrl: `${receiver.url}/cb`,
      });
      await eventually(() =>
        expect(told).toEqual(['finished:succeeded', 'callback:true', 'discarded:exec-called']),
      );
      expect(await store.discarded('exec-called')).toMatchObject({ status: 'succeeded' });
      await expect(e.start(retry(double, DISCARD, 'exec-called'))).rejects.toMatchObject({
        code: 'HG_ERR_EXECUTION_DISCARDED',
      });
    });
  });

  it('a callback not delivered: the record is kept, with its delivery outcome', async () => {
    answers = [500];
    const { engine: e, store } = engine();
    const { id } = await runWith(e, double, DISCARD, `${receiver.url}/cb`);
    await eventually(() => expect(told).toEqual(['finished:succeeded', 'callback:false']));
    await eventually(async () =>
      expect((await store.get(id))?.callback).toMatchObject({
        delivered: false,
        attempts: 2,
        status: 500,
      }),
    );
    const kept = (await e.get(id)) as Execution;
    expect(kept).toMatchObject({ status: 'succeeded', output: { total: 42 } });
    expect(told).not.toContain(`discarded:${id}`);
  });

  // A worker's run of a job queued under Keep (StartRequest.keepRecord, ADR 0041 amended
  // 2026-11-28 (day)): its Discard workflow does not decide alone, callback or not.
  it('keepRecord: a success is kept, and a delivered callback keeps it too, with its outcome', async () => {
    const { engine: e, store } = engine();
    const keep = (callbackUrl?: string) =>
      e.start({
        workflow: workflow(double, DISCARD),
        trigger: ref(),
        input: trigger({ n: 21 }),
        keepRecord: true,
        ...(callbackUrl ? { callbackUrl } : {}),
      });
    const plain = await keep();
    await eventually(() => expect(told).toEqual(['finished:succeeded']));
    const called = await keep(`${receiver.url}/cb`);
    await eventually(() =>
      expect(told).toEqual(['finished:succeeded', 'finished:succeeded', 'callback:true']),
    );
    await eventually(async () =>
      expect((await store.get(called.id))?.callback).toMatchObject({ delivered: true }),
    );
    expect(await store.get(plain.id)).toMatchObject({ status: 'succeeded' });
    expect(told.filter((t) => t.startsWith('discarded:'))).toEqual([]);
  });
});

// The memory store keeps a discarded execution's events for its handover time outside its
// byte budget: bounded by bytes too (ADR 0041), not by the number of executions alone, or
// 1,000 large results would be held on top of the budget.
describe('MemoryExecutionStore: the handover of discarded executions is bounded by bytes', () => {
  const completed = (id: string, size: number): SequencedEvent => ({
    type: 'completed',
    output: { blob: 'x'.repeat(size) },
    executionId: id,
    seq: 1,
    at: new Date().toISOString(),
  });
  const execution = (id: string): Execution => ({
    id,
    workflowId: 'wf',
    triggerKey: 'default/t',
    status: 'succeeded',
    createdAt: new Date().toISOString(),
    input: trigger({}),
    log: [],
  });
  /** Kept for the handover time at all: a caller waits for them (StartRequest.watched). */
  const WATCHED = { watched: true };
  const outputOf = async (store: MemoryExecutionStore, id: string) => {
    const [event] = await store.events(id, 0);
    return event?.type === 'completed' ? event : undefined;
  };

  it('beyond the budget the oldest go cut, then go; the newest is always read', async () => {
    const store = new MemoryExecutionStore({ maxBytes: 100_000, maxBodyBytes: 1_000 });
    for (let i = 0; i < 3; i++)
      await store.discard(execution(`d${i}`), [completed(`d${i}`, 40_000)], WATCHED);
    // 120 kB whole: the oldest is cut (the caller still gets its end), the others whole.
    expect((await outputOf(store, 'd0'))?.truncated).toBeDefined();
    expect(await outputOf(store, 'd1')).not.toHaveProperty('truncated');
    expect((await outputOf(store, 'd2'))?.output).toEqual({ blob: 'x'.repeat(40_000) });
    for (let i = 3; i < 300; i++)
      await store.discard(execution(`d${i}`), [completed(`d${i}`, 40_000)], WATCHED);
    // Cut ones past the budget too: the oldest are gone.
    expect(await store.events('d0', 0)).toEqual([]);
    expect((await outputOf(store, 'd299'))?.output).toEqual({ blob: 'x'.repeat(40_000) });
    expect(store.stats()).toMatchObject({ bytes: 0, entries: 0 });
  });

  it('one result over the budget is still read, cut', async () => {
    const store = new MemoryExecutionStore({ maxBytes: 10_000, maxBodyBytes: 1_000 });
    await store.discard(execution('big'), [completed('big', 50_000)], WATCHED);
    expect((await outputOf(store, 'big'))?.truncated).toBeDefined();
  });
});
