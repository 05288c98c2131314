// Controller behaviour (O1, O3, O10), with controller-runtime's controller_test.go
// cases ported where they apply. Delays run on a FakeClock; reconciles are controlled
// with deferred promises, so nothing here depends on timing.
import { describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { FakeClock } from '../../operator/controller/clock.ts';
import {
  Controller,
  TerminalError,
  isTerminalError,
  type ReconcileOutcome,
} from '../../operator/controller/controller.ts';
import { OperatorMetrics } from '../../operator/controller/metrics.ts';

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

async function until(cond: () => boolean, what = 'condition'): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    if (cond()) return;
    await tick();
  }
  throw new Error(`timed out waiting for ${what}`);
}

interface Deferred<T> {
  promise: Promise<T>;
  resolve: (v: T) => void;
  reject: (e: unknown) => void;
}
function deferred<T>(): Deferred<T> {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

type Step = ReconcileOutcome | void | Error;

/** A reconciler scripted per call; records calls and concurrency. */
function scripted(steps: Step[] = []) {
  const calls: string[] = [];
  const inFlight = new Set<string>();
  let maxParallel = 0;
  const script = [...steps];
  return {
    calls,
    script,
    get maxParallel() {
      return maxParallel;
    },
    reconcile: async (key: string): Promise<ReconcileOutcome | void> => {
      if (inFlight.has(key)) throw new Error(`${key} reconciled twice at once`);
      inFlight.add(key);
      maxParallel = Math.max(maxParallel, inFlight.size);
      calls.push(key);
      await tick();
      inFlight.delete(key);
      const step = script.shift();
      if (step instanceof Error) throw step;
      return step;
    },
  };
}

function newController(
  reconcile: (key: string) => Promise<ReconcileOutcome | void>,
  extra: { workers?: number; metrics?: OperatorMetrics } = {},
) {
  const clock = new FakeClock();
  const logs: { msg: string; fields?: object }[] = [];
  const ctrl = new Controller({
    name: 'test',
    reconcile,
    clock,
    log: (msg, fields) => logs.push({ msg, ...(fields ? { fields } : {}) }),
    ...extra,
  });
  return { ctrl, clock, logs };
}

describe('Controller', () => {
  it('collapses N enqueues of one key into one reconcile (O1: no extra work)', async () => {
    const r = scripted();
    const { ctrl } = newController(r.reconcile);
    for (let i = 0; i < 10; i++) ctrl.enqueue('ns/a');
    ctrl.start();
    await until(() => r.calls.length === 1);
    for (let i = 0; i < 5; i++) await tick();
    expect(r.calls).toEqual(['ns/a']);
    await ctrl.stop();
  });

  it('does not reconcile before start (keys wait for the initial sync, O8)', async () => {
    const r = scripted();
    const { ctrl } = newController(r.reconcile);
    ctrl.enqueue('ns/a');
    ctrl.enqueue('ns/b');
    for (let i = 0; i < 5; i++) await tick();
    expect(r.calls).toEqual([]);
    ctrl.start();
    await until(() => r.calls.length === 2);
    expect(r.calls.sort()).toEqual(['ns/a', 'ns/b']);
    await ctrl.stop();
  });

  it('reconciles different keys in parallel (default 4 workers), one in flight per key', async () => {
    const gates = new Map<string, Deferred<void>>();
    const running = new Set<string>();
    let maxParallel = 0;
    const calls: string[] = [];
    const { ctrl } = newController(async (key) => {
      if (running.has(key)) throw new Error('same key twice at once');
      running.add(key);
      calls.push(key);
      maxParallel = Math.max(maxParallel, running.size);
      const gate = deferred<void>();
      gates.set(key, gate);
      await gate.promise;
      running.delete(key);
    });
    for (const k of ['a', 'b', 'c', 'd', 'e', 'f']) ctrl.enqueue(k);
    ctrl.start();
    await until(() => running.size === 4, 'four in flight');
    expect(calls).toEqual(['a', 'b', 'c', 'd']);
    // Re-adding a key that is in flight must not start a second reconcile of it...
    ctrl.enqueue('a');
    await tick();
    expect(running.size).toBe(4);
    gates.get('a')?.resolve();
    // ...it runs again after the first finishes, behind the keys already queued (FIFO).
    await until(() => calls.length === 5);
    expect(calls[4]).toBe('e');
    for (const k of ['b', 'c', 'd', 'e']) gates.get(k)?.resolve();
    await until(() => calls.length === 7);
    expect(calls.slice(5).sort()).toEqual(['a', 'f']);
    for (const k of ['a', 'f']) gates.get(k)?.resolve();
    await ctrl.stop();
    expect(maxParallel).toBe(4);
  });

  it('honours the workers option', async () => {
    const r = scripted();
    const { ctrl } = newController(r.reconcile, { workers: 1 });
    for (const k of ['a', 'b', 'c']) ctrl.enqueue(k);
    ctrl.start();
    await until(() => r.calls.length === 3);
    expect(r.maxParallel).toBe(1);
    await ctrl.stop();
  });

  it('requeues errors with per-key exponential backoff (5 ms, 10 ms, 20 ms) (O3)', async () => {
    const r = scripted([new Error('a'), new Error('b'), new Error('c')]);
    const { ctrl, clock, logs } = newController(r.reconcile);
    ctrl.enqueue('k');
    ctrl.start();
    await until(() => ctrl.queue.numRequeues('k') === 1);
    for (const [n, delay] of [
      [2, 5],
      [3, 10],
      [4, 20],
    ] as const) {
      await until(() => ctrl.queue.numRequeues('k') === n - 1, `failure ${n - 1} recorded`);
      clock.step(delay - 1);
      for (let i = 0; i < 5; i++) await tick();
      expect(r.calls.length, `not before ${delay} ms`).toBe(n - 1);
      clock.step(1);
      await until(() => r.calls.length === n, `call ${n}`);
    }
    await until(() => ctrl.queue.numRequeues('k') === 0, 'forget after success');
    expect(logs.filter((l) => l.msg === 'Reconciler error')).toHaveLength(3);
    await ctrl.stop();
  });

  it('should not reset backoff until there is a non-error result (controller-runtime)', async () => {
    const r = scripted([new Error("something's wrong"), new Error("another thing's wrong")]);
    const { ctrl, clock } = newController(r.reconcile);
    ctrl.enqueue('k');
    ctrl.start();
    await until(() => r.calls.length === 1 && ctrl.queue.numRequeues('k') === 1);
    clock.step(5);
    await until(() => r.calls.length === 2 && ctrl.queue.numRequeues('k') === 2);
    clock.step(10);
    await until(() => r.calls.length === 3);
    await until(() => ctrl.queue.numRequeues('k') === 0);
    await ctrl.stop();
  });

  it('does not requeue a TerminalError, also when wrapped as a cause (O3)', async () => {
    const r = scripted([
      new TerminalError('invalid spec'),
      new Error('wrapped', { cause: new TerminalError('x') }),
    ]);
    const { ctrl, clock } = newController(r.reconcile);
    ctrl.enqueue('k');
    ctrl.start();
    await until(() => r.calls.length === 1);
    await tick();
    clock.step(10_000);
    for (let i = 0; i < 5; i++) await tick();
    expect(r.calls).toHaveLength(1);
    expect(ctrl.queue.numRequeues('k')).toBe(0);
    // A new change to the object enqueues it again.
    ctrl.enqueue('k');
    await until(() => r.calls.length === 2);
    clock.step(10_000);
    for (let i = 0; i < 5; i++) await tick();
    expect(r.calls).toHaveLength(2);
    await ctrl.stop();
    expect(isTerminalError(new Error('plain'))).toBe(false);
  });

  it('requeueAfterMs forgets the backoff and adds the key after the delay (O3)', async () => {
    const r = scripted([new Error('x'), new Error('y'), { requeueAfterMs: 1000 }]);
    const { ctrl, clock } = newController(r.reconcile);
    ctrl.enqueue('k');
    ctrl.start();
    await until(() => ctrl.queue.numRequeues('k') === 1);
    clock.step(5);
    await until(() => ctrl.queue.numRequeues('k') === 2);
    clock.step(10);
    await until(() => r.calls.length === 3);
    await until(() => ctrl.queue.numRequeues('k') === 0, 'forget on requeueAfter');
    clock.step(999);
    for (let i = 0; i < 5; i++) await tick();
    expect(r.calls).toHaveLength(3);
    clock.step(1);
    await until(() => r.calls.length === 4);
    await ctrl.stop();
  });

  it('requeue: true adds rate-limited without counting as an error', async () => {
    const registry = new Registry();
    const metrics = new OperatorMetrics(registry);
    const r = scripted([{ requeue: true }]);
    const { ctrl, clock } = newController(r.reconcile, { metrics });
    ctrl.enqueue('k');
    ctrl.start();
    await until(() => ctrl.queue.numRequeues('k') === 1);
    clock.step(5);
    await until(() => r.calls.length === 2);
    await ctrl.stop();
    const total = await metrics.reconcileTotal.get();
    const by = (result: string) => total.values.find((v) => v.labels.result === result)?.value ?? 0;
    expect(by('requeue')).toBe(1);
    expect(by('success')).toBe(1);
    expect(by('error')).toBe(0);
  });

  it('records reconcile and queue metrics', async () => {
    const registry = new Registry();
    const metrics = new OperatorMetrics(registry);
    const r = scripted([new Error('boom'), undefined, new TerminalError('no')]);
    const { ctrl, clock } = newController(r.reconcile, { metrics });
    ctrl.enqueue('a');
    ctrl.start();
    await until(() => ctrl.queue.numRequeues('a') === 1);
    clock.step(5);
    await until(() => r.calls.length === 2);
    ctrl.enqueue('b');
    await until(() => r.calls.length === 3);
    await until(() => ctrl.queue.len() === 0);
    await ctrl.stop();
    const text = await registry.metrics();
    expect(text).toContain('hookgate_operator_reconcile_total{controller="test",result="error"} 2');
    expect(text).toContain(
      'hookgate_operator_reconcile_total{controller="test",result="success"} 1',
    );
    expect(text).toContain('hookgate_operator_reconcile_errors_total{controller="test"} 2');
    expect(text).toContain(
      'hookgate_operator_terminal_reconcile_errors_total{controller="test"} 1',
    );
    expect(text).toContain('hookgate_operator_reconcile_time_seconds_count{controller="test"} 3');
    expect(text).toContain('hookgate_operator_workqueue_adds_total{name="test"} 3');
    expect(text).toContain('hookgate_operator_workqueue_retries_total{name="test"} 1');
    expect(text).toContain('hookgate_operator_workqueue_depth{name="test"} 0');
  });

  it('stop waits for in-flight reconciles and takes no new keys (O10)', async () => {
    const gate = deferred<void>();
    const calls: string[] = [];
    let finished = false;
    const { ctrl } = newController(
      async (key) => {
        calls.push(key);
        await gate.promise;
        finished = true;
      },
      { workers: 1 },
    );
    ctrl.enqueue('a');
    ctrl.enqueue('b');
    ctrl.start();
    await until(() => calls.length === 1);
    let stopped = false;
    const stopping = ctrl.stop(60_000).then(() => (stopped = true));
    for (let i = 0; i < 5; i++) await tick();
    expect(stopped).toBe(false);
    ctrl.enqueue('c');
    gate.resolve();
    await stopping;
    expect(finished).toBe(true);
    expect(calls).toEqual(['a']);
  });

  it('stop ends with the in-flight reconcile when its key was queued again meanwhile', async () => {
    // The key's change came while it was reconciled (a gateway leaving as the loop
    // stops): done() queues it again, and no worker takes it any more. The drain waited
    // for it until its timeout (5 s for `hookgate dev`).
    const gate = deferred<void>();
    const calls: string[] = [];
    const { ctrl, logs } = newController(
      async (key) => {
        calls.push(key);
        await gate.promise;
      },
      { workers: 1 },
    );
    ctrl.enqueue('a');
    ctrl.start();
    await until(() => calls.length === 1);
    ctrl.enqueue('a');
    let stopped = false;
    const stopping = ctrl.stop(60_000).then(() => (stopped = true));
    await tick();
    expect(stopped).toBe(false);
    gate.resolve();
    for (let i = 0; i < 10 && !stopped; i++) await tick();
    expect(stopped).toBe(true);
    await stopping;
    expect(calls).toEqual(['a']);
    expect(logs.some((l) => l.msg.startsWith('Drain timed out'))).toBe(false);
  });

  it('stop gives up after the drain timeout when a reconcile hangs', async () => {
    const { ctrl, clock, logs } = newController(() => new Promise<void>(() => {}));
    ctrl.enqueue('a');
    ctrl.start();
    await tick();
    let stopped = false;
    const stopping = ctrl.stop(1000).then(() => (stopped = true));
    await tick();
    expect(stopped).toBe(false);
    clock.step(1000);
    await stopping;
    expect(logs.some((l) => l.msg.startsWith('Drain timed out'))).toBe(true);
  });

  it('cannot be started twice', async () => {
    const { ctrl } = newController(async () => {});
    ctrl.start();
    expect(() => ctrl.start()).toThrow(/already started/);
    await ctrl.stop();
  });
});
