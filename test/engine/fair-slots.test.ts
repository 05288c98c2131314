// Run slots and the wait queue shared fairly across namespaces (ADR 0049): the in-process
// engine gives a free slot to the namespace holding the fewest, keeps arrival order
// within one, refuses a namespace over its share of a full queue, and changes nothing
// for a namespace alone.
import { afterEach, describe, expect, it } from 'vitest';
import { InProcessEngine, type QueueRefusal } from '../../runtime/engine/engine.ts';
import type { Execution, StartRequest, TriggerRef } from '../../runtime/engine/ports.ts';
import type { WorkflowRegistration } from '../../api/records/records.ts';
import { finished, queuedExecution, ref, trigger, workflow } from './helpers.ts';

const engines: InProcessEngine[] = [];
function engine(options: ConstructorParameters<typeof InProcessEngine>[0] = {}): InProcessEngine {
  const e = new InProcessEngine({ onInternalError: () => {}, ...options });
  engines.push(e);
  return e;
}
/** Opens every gate of a test's held runs (an abort does not end a function's wait). */
const openAll: (() => void)[] = [];
afterEach(async () => {
  for (const open of openAll.splice(0)) open();
  await Promise.all(engines.splice(0).map((e) => e.close(500)));
});

/** The trigger of `namespace` (an empty one: a trigger without a namespace). */
function triggerIn(namespace: string): TriggerRef {
  return { ...ref(), namespace, key: `${namespace}/hook` };
}

const turn = () => new Promise((resolve) => setTimeout(resolve, 20));

/**
 * A workflow whose runs each wait until released by their body's `name`; `started`
 * lists the names in the order their runs began.
 */
function held(e: InProcessEngine) {
  const wf = workflow([{ id: 'hold', type: 'transform', expression: '$hold(body.name)' }]);
  const started: string[] = [];
  const gates = new Map<string, () => void>();
  const opened = new Map<string, Promise<void>>();
  let allOpen = false;
  const gate = (name: string) => {
    if (allOpen) return Promise.resolve();
    let promise = opened.get(name);
    if (!promise) {
      promise = new Promise<void>((resolve) => gates.set(name, resolve));
      opened.set(name, promise);
    }
    return promise;
  };
  e.expressions
    .compile(`${wf.workflowId}@${wf.generation}`, '$hold(body.name)')
    .registerFunction('hold', async (name: string) => {
      started.push(name);
      await gate(name);
      return name;
    });
  const start = (namespace: string, name: string): Promise<Execution> =>
    e.start({ workflow: wf, trigger: triggerIn(namespace), input: trigger({ name }) });
  openAll.push(() => {
    allOpen = true;
    for (const open of gates.values()) open();
  });
  const release = async (name: string) => {
    void gate(name);
    gates.get(name)?.();
    await turn();
  };
  return { wf, started, start, release };
}

describe('fair run slots', () => {
  it('a free slot goes to the namespace holding the fewest, not to the oldest execution', async () => {
    const e = engine({ concurrency: 2 });
    const { started, start, release } = held(e);
    for (let i = 1; i <= 5; i++) await start('blue', `a${i}`);
    await turn();
    await start('green', 'b1');
    await start('green', 'b2');
    await turn();
    expect(started).toEqual(['a1', 'a2']);
    // blue holds 1 slot, green none: green's first.
    await release('a1');
    expect(started).toEqual(['a1', 'a2', 'b1']);
    // blue holds 0 (a2 ended), green 1: blue's next.
    await release('a2');
    expect(started).toEqual(['a1', 'a2', 'b1', 'a3']);
    // blue 1, green 0.
    await release('b1');
    expect(started).toEqual(['a1', 'a2', 'b1', 'a3', 'b2']);
    for (const name of ['a3', 'b2', 'a4', 'a5']) await release(name);
    expect(started).toEqual(['a1', 'a2', 'b1', 'a3', 'b2', 'a4', 'a5']);
  });

  it('a namespace whose runs sit in delays holds every slot: another gets one as soon as one frees', async () => {
    const e = engine({ concurrency: 4 });
    const wf = workflow([{ id: 'wait', type: 'delay', duration: '300ms' }]);
    const ended: string[] = [];
    const go = (namespace: string, name: string) =>
      e
        .start({ workflow: wf, trigger: triggerIn(namespace), input: trigger({ name }) })
        .then((s) => finished(e, s.id))
        .then((x) => {
          expect(x.status).toBe('succeeded');
          ended.push(name);
        });
    const runs: Promise<void>[] = [];
    for (let i = 1; i <= 24; i++) runs.push(go('busy', `busy${i}`));
    await turn();
    expect(e.running).toBe(4);
    runs.push(go('quiet', 'quiet1'), go('quiet', 'quiet2'));
    await Promise.all(runs);
    // In arrival order both would end last (24 delays ahead of them, 4 at a time). Here
    // each takes the first slot that frees: ended within the first two rounds of delays
    // (however slow the machine: the order, not the time, is asserted).
    expect(ended.indexOf('quiet1')).toBeLessThan(9);
    expect(ended.indexOf('quiet2')).toBeLessThan(9);
  });

  it('keeps arrival order within each namespace', async () => {
    const e = engine({ concurrency: 2 });
    const { started, start, release } = held(e);
    await start('blue', 'hold1');
    await start('blue', 'hold2');
    await turn();
    const arrivals = ['a1', 'b1', 'b2', 'a2', 'c1', 'b3', 'a3', 'c2', 'a4'];
    const namespaceOf = (name: string) =>
      name.startsWith('a') ? 'blue' : name.startsWith('b') ? 'green' : 'red';
    for (const name of arrivals) await start(namespaceOf(name), name);
    // Ends the oldest run each time, until all have run.
    const released = new Set<string>();
    while (released.size < arrivals.length + 2) {
      const oldest = started.find((name) => !released.has(name)) as string;
      released.add(oldest);
      await release(oldest);
    }
    const order = started.slice(2);
    expect([...order].sort()).toEqual([...arrivals].sort());
    for (const prefix of ['a', 'b', 'c']) {
      const own = order.filter((name) => name.startsWith(prefix));
      expect(own).toEqual([...own].sort());
    }
    // Each slot that frees goes to a namespace holding none (the oldest such first).
    expect(order).toEqual(['b1', 'a1', 'b2', 'a2', 'c1', 'b3', 'a3', 'c2', 'a4']);
  });

  it('executions whose trigger has no namespace share a bucket of their own', async () => {
    const e = engine({ concurrency: 2 });
    const { started, start, release } = held(e);
    for (const name of ['a1', 'a2', 'a3']) await start('blue', name);
    await start('', 'x1');
    await turn();
    // The second slot: blue holds one, the bucket without a namespace none.
    expect(started).toEqual(['a1', 'x1']);
    await release('a1');
    expect(started).toEqual(['a1', 'x1', 'a2']);
  });
});

describe('the wait queue shared across namespaces', () => {
  /** One slot, `maxQueued` places, refusals counted by reason. */
  function full(maxQueued: number) {
    const refused: QueueRefusal[] = [];
    const e = engine({
      concurrency: 1,
      maxQueued,
      observer: {
        executionFinished() {},
        callbackDelivered() {},
        queueRefused: (reason) => refused.push(reason),
      },
    });
    return { e, refused, ...held(e) };
  }

  async function refusedWith(p: Promise<Execution>): Promise<unknown> {
    try {
      await p;
    } catch (error) {
      return error;
    }
    throw new Error('admitted');
  }

  it('a namespace that filled the queue alone is refused; others get in under their share', async () => {
    const { e, refused, start, release, started } = full(4);
    await start('blue', 'a0');
    await turn();
    for (let i = 1; i <= 4; i++) await start('blue', `a${i}`);
    expect(e.queued).toBe(4);
    // Alone: the bound as before.
    const alone = await refusedWith(start('blue', 'a5'));
    expect(alone).toMatchObject({
      code: 'HG_ERR_ENGINE_OVERLOADED',
      status: 503,
      headers: { 'retry-after': '5' },
    });
    expect(refused).toEqual(['queue_full']);
    // green: share ceil(4 / 2) = 2, over the full queue.
    await start('green', 'b1');
    await start('green', 'b2');
    expect(e.queued).toBe(6);
    expect(await refusedWith(start('green', 'b3'))).toMatchObject({
      code: 'HG_ERR_ENGINE_OVERLOADED',
    });
    // blue is over its share of 2 while green waits: refused for the share.
    await refusedWith(start('blue', 'a6'));
    expect(refused).toEqual(['queue_full', 'namespace_share', 'namespace_share']);
    // red: ceil(4 / 3) = 2 ... until twice maxQueued wait in all.
    await start('red', 'c1');
    await start('red', 'c2');
    expect(e.queued).toBe(8);
    await refusedWith(start('yellow', 'd1'));
    expect(refused.at(-1)).toBe('queue_full');
    // What was admitted runs (one slot that each run frees before the next pick: all
    // namespaces hold none, so arrival order).
    await release('a0');
    for (let i = 0; i < 8; i++) await release(started.at(-1) as string);
    expect(started).toEqual(['a0', 'a1', 'a2', 'a3', 'a4', 'b1', 'b2', 'c1', 'c2']);
  });

  it('a namespace refused for its share is admitted again once the queue is under the bound', async () => {
    const { start, release, refused } = full(2);
    await start('blue', 'a0');
    await turn();
    await start('blue', 'a1');
    await start('blue', 'a2');
    await start('green', 'b1');
    // blue holds more than its share (1 of 2) of the full queue.
    await refusedWith(start('blue', 'a3'));
    await release('a0');
    // a1 runs: a2 and b1 wait, the queue is at its bound, each at its share.
    await refusedWith(start('blue', 'a3'));
    await refusedWith(start('green', 'b2'));
    expect(refused).toEqual(['namespace_share', 'namespace_share', 'namespace_share']);
    await release('a1');
    // a2 runs: one waits, under the bound: blue gets in again.
    await start('blue', 'a3');
    expect(refused).toHaveLength(3);
  });

  it('one namespace alone may use every slot and the whole queue, as before', async () => {
    const refused: QueueRefusal[] = [];
    const e = engine({
      maxQueued: 100,
      observer: {
        executionFinished() {},
        callbackDelivered() {},
        queueRefused: (reason) => refused.push(reason),
      },
    });
    const { start, release } = held(e);
    for (let i = 0; i < 164; i++) await start('blue', `a${i}`);
    await turn();
    expect(e.running).toBe(64);
    expect(e.queued).toBe(100);
    await expect(start('blue', 'over')).rejects.toMatchObject({
      code: 'HG_ERR_ENGINE_OVERLOADED',
    });
    expect(refused).toEqual(['queue_full']);
    for (let i = 0; i < 164; i++) void release(`a${i}`);
  });
});

describe("a worker's jobs waiting for a slot", () => {
  /** A request of `namespace` and the queued record a gateway would have stored for it. */
  async function queued(
    e: InProcessEngine,
    wf: WorkflowRegistration,
    namespace: string,
    name: string,
  ): Promise<{ request: StartRequest; execution: Execution }> {
    const input = trigger({ name }, `${namespace}-${name}`);
    const request: StartRequest = { workflow: wf, trigger: triggerIn(namespace), input };
    const execution = queuedExecution(request);
    await e.store.save(execution);
    return { request, execution };
  }

  it('run fairly, and at close() those not started go back unrun (resume rejects with shutting down)', async () => {
    const e = new InProcessEngine({ onInternalError: () => {}, concurrency: 2 });
    const { wf, started, release } = held(e);
    const jobs = [
      await queued(e, wf, 'blue', 'a1'),
      await queued(e, wf, 'blue', 'a2'),
      await queued(e, wf, 'blue', 'a3'),
      await queued(e, wf, 'green', 'b1'),
      await queued(e, wf, 'blue', 'a4'),
    ];
    const done = jobs.map(({ request, execution }) =>
      e.resume(request, execution, 1).then(
        () => 'finished',
        (error: unknown) => (error as { code?: string }).code,
      ),
    );
    await turn();
    await release('a1');
    // green's job went ahead of blue's older a3.
    expect(started).toEqual(['a1', 'a2', 'b1']);
    const closing = e.close(5_000);
    await turn();
    await release('a2');
    await release('b1');
    await closing;
    expect(await Promise.all(done)).toEqual([
      'finished',
      'finished',
      'HG_ERR_SHUTTING_DOWN',
      'finished',
      'HG_ERR_SHUTTING_DOWN',
    ]);
    // Not run, not failed: their records are still queued, for another worker.
    for (const name of ['a3', 'a4'])
      expect((await e.store.get(`blue-${name}`))?.status).toBe('queued');
  });
});
