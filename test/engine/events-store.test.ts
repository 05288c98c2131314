import { afterEach, describe, expect, it } from 'vitest';
import { InProcessEngine } from '../../runtime/engine/engine.ts';
import { MemoryExecutionStore } from '../../runtime/engine/execution-store.ts';
import type { Execution, SequencedEvent } from '../../runtime/engine/ports.ts';
import { finished, ref, storedExecution, trigger, workflow } from './helpers.ts';

const engines: InProcessEngine[] = [];
function engine(options: ConstructorParameters<typeof InProcessEngine>[0] = {}): InProcessEngine {
  const e = new InProcessEngine({ onInternalError: () => {}, ...options });
  engines.push(e);
  return e;
}
afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.close(1000)));
});

/** A gate a workflow waits on: a registered JSONata function that resolves when opened. */
function gate(): { open: () => void; wait: () => Promise<boolean> } {
  let open = (): void => {};
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, wait: () => opened.then(() => true) };
}

describe('events', () => {
  const nodes = [
    { id: 'a', type: 'transform' as const, expression: '{ "v": 1 }' },
    { id: 'r', type: 'respond' as const },
    { id: 'b', type: 'transform' as const, expression: '{ "v": 2 }' },
  ];

  it('are numbered 1..n in order and replay to a late subscriber', async () => {
    const e = engine();
    const s = await e.start({ workflow: workflow(nodes), trigger: ref(), input: trigger({}) });
    await finished(e, s.id);
    const late: SequencedEvent[] = [];
    e.subscribe(s.id, 0, (event) => late.push(event));
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(late.map((ev) => ev.seq)).toEqual(late.map((_, i) => i + 1));
    expect(late.map((ev) => [ev.type, 'nodeId' in ev ? ev.nodeId : undefined])).toEqual([
      ['queued', undefined],
      ['node.started', 'a'],
      ['node.finished', 'a'],
      ['node.started', 'r'],
      ['respond', undefined],
      ['node.finished', 'r'],
      ['node.started', 'b'],
      ['node.finished', 'b'],
      ['completed', undefined],
    ]);
    expect(late.every((ev) => ev.executionId === s.id && typeof ev.at === 'string')).toBe(true);
    expect(late.at(-1)).toMatchObject({ type: 'completed', output: { v: 2 } });

    const after5: SequencedEvent[] = [];
    e.subscribe(s.id, 5, (event) => after5.push(event));
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(after5.map((ev) => ev.seq)).toEqual([6, 7, 8, 9]);
  });

  it('replay then live, without gaps or duplicates, for a subscriber joining mid-run', async () => {
    const e = engine();
    const g = gate();
    const wf = workflow([
      { id: 'a', type: 'transform', expression: '{ "v": 1 }' },
      { id: 'hold', type: 'transform', expression: '$hold()' },
      { id: 'b', type: 'transform', expression: '{ "v": 2 }' },
    ]);
    e.expressions
      .compile(`${wf.workflowId}@${wf.generation}`, '$hold()')
      .registerFunction('hold', () => g.wait());
    const s = await e.start({ workflow: wf, trigger: ref(), input: trigger({}) });
    // Wait until the run is parked inside 'hold'.
    await new Promise<void>((resolve) => {
      const off = e.subscribe(s.id, 0, (event) => {
        if (event.type === 'node.started' && event.nodeId === 'hold') {
          queueMicrotask(() => off());
          resolve();
        }
      });
    });
    const seen: SequencedEvent[] = [];
    const done = new Promise<void>((resolve) => {
      e.subscribe(s.id, 2, (event) => {
        seen.push(event);
        if (event.type === 'completed') resolve();
      });
    });
    expect(seen.map((ev) => ev.seq)).toEqual([3, 4]); // replayed synchronously
    g.open();
    await done;
    expect(seen.map((ev) => ev.seq)).toEqual([3, 4, 5, 6, 7, 8]);
    expect(seen.at(-1)?.type).toBe('completed');
  });

  it('unsubscribe stops delivery and leaves no listener behind', async () => {
    const e = engine();
    const g = gate();
    const wf = workflow([{ id: 'hold', type: 'transform', expression: '$hold()' }]);
    e.expressions
      .compile(`${wf.workflowId}@${wf.generation}`, '$hold()')
      .registerFunction('hold', () => g.wait());
    const s = await e.start({ workflow: wf, trigger: ref(), input: trigger({}) });
    const got: SequencedEvent[] = [];
    const offs = Array.from({ length: 10 }, () => e.subscribe(s.id, 0, (ev) => got.push(ev)));
    expect(e.listenerCount(s.id)).toBe(10);
    for (const off of offs) off();
    expect(e.listenerCount(s.id)).toBe(0);
    const before = got.length;
    const keep = e.subscribe(s.id, 1000, () => {});
    expect(e.listenerCount(s.id)).toBe(1);
    g.open();
    const execution = await finished(e, s.id);
    expect(execution.status).toBe('succeeded');
    expect(got.length).toBe(before);
    // After the terminal event the engine drops remaining listeners itself.
    expect(e.listenerCount(s.id)).toBe(0);
    keep();
  });

  it('a throwing listener is dropped and does not break the run', async () => {
    const e = engine();
    const s = await e.start({
      workflow: workflow([{ id: 'a', type: 'transform', expression: '1' }]),
      trigger: ref(),
      input: trigger({}),
    });
    e.subscribe(s.id, 1, () => {
      throw new Error('listener bug');
    });
    const execution = await finished(e, s.id);
    expect(execution.status).toBe('succeeded');
  });

  it('get of an unknown id is undefined and subscribe delivers nothing', async () => {
    const e = engine();
    expect(await e.get('nope')).toBeUndefined();
    const got: SequencedEvent[] = [];
    const off = e.subscribe('nope', 0, (ev) => got.push(ev));
    await new Promise((resolve) => setTimeout(resolve, 5));
    off();
    expect(got).toEqual([]);
  });
});

describe('queue and shutdown', () => {
  it('runs at most `concurrency` executions at once', async () => {
    const e = engine({ concurrency: 2 });
    const g = gate();
    const wf = workflow([{ id: 'hold', type: 'transform', expression: '$hold()' }]);
    let inside = 0;
    let peak = 0;
    e.expressions
      .compile(`${wf.workflowId}@${wf.generation}`, '$hold()')
      .registerFunction('hold', async () => {
        inside++;
        peak = Math.max(peak, inside);
        await g.wait();
        inside--;
        return true;
      });
    const started = await Promise.all(
      Array.from({ length: 6 }, () =>
        e.start({ workflow: wf, trigger: ref(), input: trigger({}) }),
      ),
    );
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(e.running).toBe(2);
    expect(e.queued).toBe(4);
    const queuedList = await e.list({ status: 'queued' });
    expect(queuedList).toHaveLength(4);
    g.open();
    const all = await Promise.all(started.map((s) => finished(e, s.id)));
    expect(all.every((x) => x.status === 'succeeded')).toBe(true);
    expect(peak).toBe(2);
  });

  /** One slot, one place in the queue, and a workflow whose runs wait for the gate. */
  function heldOneAtATime() {
    const e = engine({ concurrency: 1, maxQueued: 1 });
    const g = gate();
    const wf = workflow([{ id: 'hold', type: 'transform', expression: '$hold()' }]);
    e.expressions
      .compile(`${wf.workflowId}@${wf.generation}`, '$hold()')
      .registerFunction('hold', () => g.wait());
    return { e, g, wf };
  }

  it('refuses new executions beyond maxQueued with HG_ERR_ENGINE_OVERLOADED', async () => {
    const { e, g, wf } = heldOneAtATime();
    await e.start({ workflow: wf, trigger: ref(), input: trigger({}) });
    await new Promise((resolve) => setTimeout(resolve, 5));
    await e.start({ workflow: wf, trigger: ref(), input: trigger({}) });
    await expect(
      e.start({ workflow: wf, trigger: ref(), input: trigger({}) }),
    ).rejects.toMatchObject({ code: 'HG_ERR_ENGINE_OVERLOADED', status: 503 });
    g.open();
  });

  it('counts starts of one turn against the free slots: they run on the next turn, after the answers', async () => {
    const { e, g, wf } = heldOneAtATime();
    // In one turn: the first takes the free slot, the second the one place in the queue.
    const [first, second] = await Promise.all([
      e.start({ workflow: wf, trigger: ref(), input: trigger({}) }),
      e.start({ workflow: wf, trigger: ref(), input: trigger({}) }),
    ]);
    // Answered before either run began (an Immediate ACK leaves first).
    expect([first?.status, second?.status]).toEqual(['queued', 'queued']);
    expect(e.running).toBe(0);
    expect(e.queued).toBe(1);
    await expect(
      e.start({ workflow: wf, trigger: ref(), input: trigger({}) }),
    ).rejects.toMatchObject({ code: 'HG_ERR_ENGINE_OVERLOADED', status: 503 });
    await new Promise((resolve) => setImmediate(resolve));
    expect(e.running).toBe(1);
    expect(e.queued).toBe(1);
    g.open();
    const done = await Promise.all([first, second].map((x) => finished(e, x?.id ?? '')));
    expect(done.map((x) => x.status)).toEqual(['succeeded', 'succeeded']);
  });

  it('close ends a run that starts during the drain and fails under a retry policy, without waiting for its next attempt', async () => {
    const e = new InProcessEngine({ onInternalError: () => {} });
    const wf = workflow([{ id: 'stop', type: 'fail', expression: '"not yet"', statusCode: 503 }], {
      retry: {
        attempts: 3,
        backoff: { initial: '10s', max: '10s', multiplier: 1, jitter: 0 },
        on: ['fail'],
      },
    });
    const s = await e.start({ workflow: wf, trigger: ref(), input: trigger({}) });
    // In the same turn: the run starts after close() began.
    const closing = e.close(5_000);
    const outcome = await Promise.race([
      closing,
      new Promise((resolve) => setTimeout(() => resolve('hung'), 4_000)),
    ]);
    expect(outcome).toEqual({ drained: true });
    const ended = await e.get(s.id);
    expect(ended?.status).toBe('failed');
    expect(ended?.error?.message).toContain('engine shut down before attempt 2');
    // Failed: no next attempt is due any more.
    expect(ended?.nextAttemptAt).toBeUndefined();
  });

  it('a start whose queued record the store refuses lets go of it: the same id starts again, close does not wait', async () => {
    let refuse = true;
    class RefusingStore extends MemoryExecutionStore {
      override save(execution: Execution): Promise<void> {
        if (refuse) return Promise.reject(new Error('store down'));
        return super.save(execution);
      }
    }
    const e = new InProcessEngine({ store: new RefusingStore(), onInternalError: () => {} });
    const wf = workflow([{ id: 'x', type: 'transform', expression: '"done"' }]);
    const input = trigger({});
    input.metadata.executionId = 'ex-refused-once';
    await expect(e.start({ workflow: wf, trigger: ref(), input })).rejects.toThrow('store down');
    expect(await e.get('ex-refused-once')).toBeUndefined();
    refuse = false;
    const again = await e.start({ workflow: wf, trigger: ref(), input });
    expect(again.id).toBe('ex-refused-once');
    expect((await finished(e, again.id)).status).toBe('succeeded');
    const outcome = await Promise.race([
      e.close(5_000),
      new Promise((resolve) => setTimeout(() => resolve('hung'), 2_000)),
    ]);
    expect(outcome).toEqual({ drained: true });
  });

  it('close gives up on a start whose queued record was being saved: that execution fails, close does not hang', async () => {
    let release = (): void => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    let hold = true;
    class SlowStore extends MemoryExecutionStore {
      override async save(execution: Execution): Promise<void> {
        if (hold && execution.status === 'queued') {
          hold = false;
          await held;
        }
        return super.save(execution);
      }
    }
    const e = new InProcessEngine({ store: new SlowStore(), onInternalError: () => {} });
    const wf = workflow([{ id: 'x', type: 'transform', expression: '"done"' }]);
    const started = e.start({ workflow: wf, trigger: ref(), input: trigger({}) });
    await new Promise((resolve) => setTimeout(resolve, 5));
    // Its drain times out while the record is still being saved, then the save ends.
    const closing = e.close(20);
    await new Promise((resolve) => setTimeout(resolve, 50));
    release();
    const s = await started;
    const outcome = await Promise.race([
      closing,
      new Promise((resolve) => setTimeout(() => resolve('hung'), 2_000)),
    ]);
    expect(outcome).toEqual({ drained: false });
    const ended = await e.get(s.id);
    expect(ended?.status).toBe('failed');
    expect(ended?.error?.message).toContain('engine shut down');
  });

  it('a start whose reads were under way when close() drained is refused, not run after close', async () => {
    let release = (): void => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    class SlowStore extends MemoryExecutionStore {
      override async get(id: string): Promise<Execution | undefined> {
        await held;
        return super.get(id);
      }
    }
    const e = new InProcessEngine({ store: new SlowStore(), onInternalError: () => {} });
    const wf = workflow([{ id: 'x', type: 'transform', expression: '"done"' }]);
    const started = e.start({ workflow: wf, trigger: ref(), input: trigger({}) });
    const closed = await e.close(1_000);
    expect(closed).toEqual({ drained: true });
    release();
    await expect(started).rejects.toMatchObject({ code: 'HG_ERR_SHUTTING_DOWN' });
    expect(e.running + e.queued).toBe(0);
  });

  it('close waits for running executions', async () => {
    const e = new InProcessEngine({ onInternalError: () => {} });
    const s = await e.start({
      workflow: workflow([
        { id: 'd', type: 'delay', duration: '30ms' },
        { id: 'x', type: 'transform', expression: '"done"' },
      ]),
      trigger: ref(),
      input: trigger({}),
    });
    const result = await e.close(5000);
    expect(result.drained).toBe(true);
    expect((await e.get(s.id))?.status).toBe('succeeded');
    await expect(
      e.start({
        workflow: workflow([{ id: 'x', type: 'transform', expression: '1' }]),
        trigger: ref(),
        input: trigger({}),
      }),
    ).rejects.toMatchObject({ code: 'HG_ERR_SHUTTING_DOWN' });
  });

  it('close cancels delays after its timeout; those executions fail as shut down', async () => {
    const e = new InProcessEngine({ onInternalError: () => {}, concurrency: 1 });
    const wf = workflow([{ id: 'long', type: 'delay', duration: '10m' }]);
    const a = await e.start({ workflow: wf, trigger: ref(), input: trigger({}) });
    const b = await e.start({ workflow: wf, trigger: ref(), input: trigger({}) });
    await new Promise((resolve) => setTimeout(resolve, 10));
    const result = await e.close(20);
    expect(result.drained).toBe(false);
    const ea = (await e.get(a.id)) as Execution;
    const eb = (await e.get(b.id)) as Execution;
    expect(ea.status).toBe('failed');
    expect(ea.error?.message).toMatch(/shut down during node 'long'/);
    expect(eb.status).toBe('failed');
    expect(eb.error?.message).toMatch(/shut down before the run/);
  });
});

describe('executions store and list', () => {
  it('lists newest first with workflow, trigger, status, time range and limit filters', async () => {
    const e = engine();
    const ok = workflow([{ id: 'a', type: 'transform', expression: '1' }], {}, 'wf-ok');
    const bad = workflow([{ id: 'f', type: 'fail' }], {}, 'wf-bad');
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const s = await e.start({
        workflow: ok,
        trigger: ref('shop/a', 'wf-ok'),
        input: trigger({ i }),
      });
      ids.push(s.id);
      await finished(e, s.id);
    }
    const f = await e.start({
      workflow: bad,
      trigger: ref('shop/b', 'wf-bad'),
      input: trigger({}),
    });
    await finished(e, f.id);

    const all = await e.list({});
    expect(all.map((x) => x.id)).toEqual([f.id, ...[...ids].reverse()]);
    expect((await e.list({ workflowId: 'wf-ok' })).map((x) => x.id)).toEqual([...ids].reverse());
    expect((await e.list({ triggerKey: 'shop/b' })).map((x) => x.id)).toEqual([f.id]);
    expect((await e.list({ status: 'failed' })).map((x) => x.id)).toEqual([f.id]);
    expect((await e.list({ status: 'succeeded', limit: 2 })).map((x) => x.id)).toEqual([
      ids[2],
      ids[1],
    ]);
    const future = new Date(Date.now() + 60_000).toISOString();
    expect(await e.list({ since: future })).toEqual([]);
    expect((await e.list({ until: future })).length).toBe(4);
    expect(await e.list({ until: '2000-01-01T00:00:00Z' })).toEqual([]);
    const one = all[0] as Execution;
    expect(one.log.length).toBeGreaterThan(0);
    expect(one.finishedAt).toBeDefined();
  });

  it('memory store keeps at most maxExecutions and drops entries after the TTL', async () => {
    let now = Date.parse('2026-01-01T00:00:00Z');
    const store = new MemoryExecutionStore({ maxExecutions: 3, ttlMs: 1000, now: () => now });
    const make = (id: string): Execution => storedExecution(id, now);
    for (const id of ['a', 'b', 'c', 'd']) {
      await store.save(make(id));
      now += 10;
    }
    expect(store.size).toBe(3);
    expect(await store.get('a')).toBeUndefined();
    expect((await store.list({})).map((x) => x.id)).toEqual(['d', 'c', 'b']);
    now += 2000;
    expect(await store.list({})).toEqual([]);
    expect(await store.get('d')).toBeUndefined();
    await store.save(make('e'));
    expect(store.size).toBe(1);
  });

  it('memory store: a dead-lettered entry holds up no sweep of the others, and over a bound the first to expire goes', async () => {
    let now = Date.parse('2026-01-01T00:00:00Z');
    const stats = () => store.stats().evictions;
    const store = new MemoryExecutionStore({ maxExecutions: 3, ttlMs: 1000, now: () => now });
    const make = (id: string, extra: Partial<Execution> = {}): Execution =>
      storedExecution(id, now, extra);
    const dead = (id: string, createdAt: string) =>
      make(id, {
        status: 'failed',
        createdAt,
        finishedAt: new Date(now).toISOString(),
        deadLetteredAt: new Date(now).toISOString(),
      });
    // 'dead' is created first and dead-lettered 900 ms later, after 'a' and 'b'.
    const created = new Date(now).toISOString();
    await store.save(make('dead', { status: 'running' }));
    now += 100;
    await store.save(make('a'));
    now += 100;
    await store.save(make('b'));
    now += 700;
    await store.save(dead('dead', created));
    // Past the lifetime of 'a' and 'b', not of the dead-lettered one (a lifetime and a
    // minute after it was dead-lettered): they are swept all the same.
    now += 1000;
    await store.save(make('c'));
    await store.save(make('d'));
    expect(stats()).toMatchObject({ expired: 2, count: 0 });
    expect((await store.list({})).map((x) => x.id)).toEqual(['d', 'c', 'dead']);
    // Over the count, the one that expires first goes: 'c' before the dead-lettered one...
    now += 100;
    await store.save(make('e'));
    expect(stats()).toMatchObject({ expired: 2, count: 1 });
    expect((await store.list({})).map((x) => x.id)).toEqual(['e', 'd', 'dead']);
    // ... and the dead-lettered one before an entry created a minute later.
    now += 59_000;
    await store.save(make('f'));
    expect(stats()).toMatchObject({ expired: 4, count: 1 });
    await store.save(make('g'));
    await store.save(make('h'));
    expect(stats()).toMatchObject({ expired: 4, count: 2 });
    expect((await store.list({})).map((x) => x.id)).toEqual(['h', 'g', 'f']);
    expect(await store.get('dead')).toBeUndefined();
  });

  it('the store hands out copies (and keeps what it is given until it is saved again)', async () => {
    const store = new MemoryExecutionStore();
    const execution: Execution = {
      id: 'x',
      workflowId: 'w',
      triggerKey: 't',
      status: 'running',
      createdAt: new Date().toISOString(),
      input: trigger({}),
      log: [],
    };
    await store.save(execution);
    const got = (await store.get('x')) as Execution;
    expect(got).toEqual(execution);
    expect(got).not.toBe(execution);
    got.status = 'succeeded';
    got.log.push({ nodeId: 'n', type: 'transform', startedAt: '', status: 'running', attempts: 1 });
    expect(await store.get('x')).toEqual(execution);
    const [listed] = await store.list({});
    listed!.status = 'failed';
    expect((await store.get('x'))?.status).toBe('running');
  });
});
