// Ports of client-go's util/workqueue tests (queue_test.go, delaying_queue_test.go,
// rate_limiting_queue_test.go, default_rate_limiters_test.go). Goroutines become async
// tasks; sleeps become macrotask yields; delays run on a FakeClock.
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../operator/controller/clock.ts';
import {
  BucketRateLimiter,
  ItemExponentialFailureRateLimiter,
  ItemFastSlowRateLimiter,
  MaxOfRateLimiter,
  defaultControllerRateLimiter,
} from '../../operator/controller/rate-limiter.ts';
import { WorkQueue } from '../../operator/controller/workqueue.ts';

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

type ShutDownKind = 'shutDown' | 'shutDownWithDrain';
const shutDownKinds: ShutDownKind[] = ['shutDown', 'shutDownWithDrain'];

async function shutDownQueue(q: WorkQueue, kind: ShutDownKind): Promise<void> {
  if (kind === 'shutDown') q.shutDown();
  else await q.shutDownWithDrain();
}

/** A consumer loop that records concurrency violations. */
function consumer(
  q: WorkQueue,
  inFlight: Set<string>,
  seen: string[],
  onItem?: (key: string) => void,
): Promise<void> {
  return (async () => {
    for (;;) {
      const key = await q.get();
      if (key === undefined) return;
      if (inFlight.has(key)) throw new Error(`${key} handed to two workers at once`);
      inFlight.add(key);
      seen.push(key);
      await tick();
      onItem?.(key);
      inFlight.delete(key);
      q.done(key);
    }
  })();
}

describe('WorkQueue (client-go queue_test.go)', () => {
  for (const kind of shutDownKinds) {
    it(`TestBasic (${kind}): producers and consumers, nothing after shutdown, one worker per key`, async () => {
      const q = new WorkQueue();
      const producers = Array.from({ length: 50 }, (_, i) =>
        (async () => {
          for (let j = 0; j < 10; j++) {
            q.add(String(i));
            await tick();
          }
        })(),
      );
      const inFlight = new Set<string>();
      const seen: string[] = [];
      const consumers = Array.from({ length: 10 }, () => consumer(q, inFlight, seen));
      await Promise.all(producers);
      const shut = shutDownQueue(q, kind);
      q.add('added after shutdown!');
      await Promise.all(consumers);
      await shut;
      expect(seen).not.toContain('added after shutdown!');
      expect(new Set(seen).size).toBe(50);
      expect(q.len()).toBe(0);
    });

    it(`TestAddWhileProcessing (${kind}): re-added keys run again after done`, async () => {
      const q = new WorkQueue();
      for (let i = 0; i < 50; i++) q.add(String(i));
      const counts = new Map<string, number>();
      const inFlight = new Set<string>();
      const seen: string[] = [];
      // Every key is re-added while processing, once: the dirty-while-processing case.
      const consumers = Array.from({ length: 10 }, () =>
        consumer(q, inFlight, seen, (key) => {
          const n = (counts.get(key) ?? 0) + 1;
          counts.set(key, n);
          if (n < 2) q.add(key);
        }),
      );
      while ([...counts.values()].filter((n) => n === 2).length < 50) await tick();
      await shutDownQueue(q, kind);
      await Promise.all(consumers);
      expect(q.len()).toBe(0);
      for (let i = 0; i < 50; i++) expect(counts.get(String(i))).toBe(2);
    });
  }

  it('TestLen: duplicate adds collapse', () => {
    const q = new WorkQueue();
    q.add('foo');
    expect(q.len()).toBe(1);
    q.add('bar');
    expect(q.len()).toBe(2);
    q.add('foo');
    expect(q.len()).toBe(2);
  });

  it('is FIFO', async () => {
    const q = new WorkQueue();
    for (const k of ['c', 'a', 'b', 'a', 'c', 'd']) q.add(k);
    const order: (string | undefined)[] = [];
    for (let i = 0; i < 4; i++) order.push(await q.get());
    expect(order).toEqual(['c', 'a', 'b', 'd']);
  });

  it('TestReinsert: a key added while processing comes back after done', async () => {
    const q = new WorkQueue();
    q.add('foo');
    const i = await q.get();
    expect(i).toBe('foo');
    q.add('foo');
    expect(q.len()).toBe(0);
    q.done('foo');
    expect(await q.get()).toBe('foo');
    q.done('foo');
    expect(q.len()).toBe(0);
  });

  it('TestCollapseWhileProcessing: many adds while processing collapse into one rerun', async () => {
    const q = new WorkQueue();
    q.add('foo');
    expect(await q.get()).toBe('foo');
    q.add('foo');
    q.add('foo');
    q.add('foo');
    expect(q.len()).toBe(0); // not handed to a second worker while held
    const second = q.get();
    let secondGot: string | undefined;
    void second.then((k) => (secondGot = k));
    await tick();
    expect(secondGot).toBeUndefined();
    q.done('foo');
    expect(await second).toBe('foo');
    expect(q.len()).toBe(0);
    q.done('foo');
    expect(q.len()).toBe(0);
  });

  it('hands out a waiting key to a blocked get in order', async () => {
    const q = new WorkQueue();
    const a = q.get();
    const b = q.get();
    q.add('x');
    q.add('y');
    expect(await a).toBe('x');
    expect(await b).toBe('y');
  });

  it('TestQueueDrainageUsingShutDownWithDrain: waits for items in flight', async () => {
    const q = new WorkQueue();
    q.add('foo');
    q.add('bar');
    const first = (await q.get()) as string;
    const second = (await q.get()) as string;
    let finished = false;
    const drained = q.shutDownWithDrain().then(() => (finished = true));
    expect(await q.get()).toBeUndefined();
    await tick();
    expect(finished).toBe(false);
    q.done(first);
    await tick();
    expect(finished).toBe(false);
    q.done(second);
    await drained;
    expect(finished).toBe(true);
  });

  it('TestNoQueueDrainageUsingShutDown: shutDown does not wait', async () => {
    const q = new WorkQueue();
    q.add('foo');
    q.add('bar');
    await q.get();
    await q.get();
    q.shutDown();
    expect(await q.get()).toBeUndefined();
  });

  it('TestForceQueueShutdownUsingShutDown: shutDown ends a pending drain', async () => {
    const q = new WorkQueue();
    q.add('foo');
    q.add('bar');
    await q.get();
    await q.get();
    let finished = false;
    const drained = q.shutDownWithDrain().then(() => (finished = true));
    expect(await q.get()).toBeUndefined();
    await tick();
    expect(finished).toBe(false);
    q.shutDown();
    await drained;
    expect(finished).toBe(true);
  });

  it('TestQueueDrainageUsingShutDownWithDrainWithDirtyItem', async () => {
    const q = new WorkQueue();
    q.add('foo');
    const gotten = (await q.get()) as string;
    q.add('foo');
    let finished = false;
    const drained = q.shutDownWithDrain().then(() => (finished = true));
    expect(await q.get()).toBeUndefined();
    q.done(gotten);
    // Done put the dirty key back: it is handed out although we are shutting down.
    const again = await q.get();
    expect(again).toBe('foo');
    await tick();
    expect(finished).toBe(false);
    q.done('foo');
    expect(await q.get()).toBeUndefined();
    await drained;
    expect(finished).toBe(true);
  });

  it('ignores adds, delayed adds and rate-limited adds after shutdown', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock });
    q.addAfter('late', 10);
    q.shutDown();
    q.add('a');
    q.addAfter('b', 1);
    q.addRateLimited('c');
    clock.step(1000);
    expect(q.len()).toBe(0);
    expect(clock.pendingTimers()).toBe(0);
    expect(await q.get()).toBeUndefined();
  });
});

describe('WorkQueue delaying (client-go delaying_queue_test.go)', () => {
  it('TestSimpleQueue', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock });
    q.addAfter('foo', 50);
    expect(q.len()).toBe(0);
    clock.step(60);
    expect(q.len()).toBe(1);
    const item = (await q.get()) as string;
    q.done(item);
    clock.step(10_000);
    expect(q.len()).toBe(0);
  });

  it('TestDeduping: the earlier time wins', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock });
    q.addAfter('foo', 50);
    q.addAfter('foo', 70);
    expect(q.len()).toBe(0);
    clock.step(60);
    expect(q.len()).toBe(1);
    q.done((await q.get()) as string);
    clock.step(20);
    expect(q.len()).toBe(0);

    q.addAfter('foo', 50);
    q.addAfter('foo', 30);
    expect(q.len()).toBe(0);
    clock.step(40);
    expect(q.len()).toBe(1);
  });

  it('TestAddTwoFireEarly', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock });
    q.addAfter('foo', 1000);
    q.addAfter('bar', 50);
    expect(q.len()).toBe(0);
    clock.step(60);
    expect(q.len()).toBe(1);
    expect(await q.get()).toBe('bar');
    q.done('bar');
    q.addAfter('baz', 2000);
    clock.step(1000);
    expect(q.len()).toBe(1);
    expect(await q.get()).toBe('foo');
    clock.step(1000);
    expect(q.len()).toBe(1);
    expect(await q.get()).toBe('baz');
  });

  it('TestCopyShifting: keys ready together are queued by due time', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock });
    q.addAfter('foo', 1000);
    q.addAfter('bar', 500);
    q.addAfter('baz', 250);
    expect(q.len()).toBe(0);
    clock.step(2000);
    expect(q.len()).toBe(3);
    expect([await q.get(), await q.get(), await q.get()]).toEqual(['baz', 'bar', 'foo']);
  });

  it('addAfter with a zero or negative delay adds at once', () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    q.addAfter('a', 0);
    q.addAfter('b', -5);
    expect(q.len()).toBe(2);
  });

  it('works on the real clock', async () => {
    const q = new WorkQueue();
    const started = performance.now();
    q.addAfter('x', 20);
    expect(await q.get()).toBe('x');
    expect(performance.now() - started).toBeGreaterThanOrEqual(15);
  });
});

describe('WorkQueue rate limited (client-go rate_limiting_queue_test.go)', () => {
  it('TestRateLimitingQueue', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock, rateLimiter: new ItemExponentialFailureRateLimiter(1, 1000) });
    /** Assert `key` becomes ready exactly `ms` from now (q must not hold it yet). */
    const readyAfter = (key: string, ms: number): void => {
      const before = q.len();
      clock.step(ms - 0.001);
      expect(q.len(), `${key} early`).toBe(before);
      clock.step(0.001);
      expect(q.len(), `${key} on time`).toBe(before + 1);
    };
    q.addRateLimited('one');
    readyAfter('one', 1);
    q.done((await q.get()) as string);
    q.addRateLimited('one');
    readyAfter('one', 2);
    expect(q.numRequeues('one')).toBe(2);
    q.addRateLimited('two');
    readyAfter('two', 1);
    q.addRateLimited('two');
    // 'two' is still queued (not taken), so the re-add collapses; the backoff still grew.
    expect(q.numRequeues('two')).toBe(2);
    q.forget('one');
    expect(q.numRequeues('one')).toBe(0);
  });
});

describe('rate limiters (client-go default_rate_limiters_test.go)', () => {
  it('TestItemExponentialFailureRateLimiter', () => {
    const l = new ItemExponentialFailureRateLimiter(1, 1000);
    expect([1, 2, 3, 4, 5].map(() => l.when('one'))).toEqual([1, 2, 4, 8, 16]);
    expect(l.numRequeues('one')).toBe(5);
    expect([l.when('two'), l.when('two')]).toEqual([1, 2]);
    expect(l.numRequeues('two')).toBe(2);
    l.forget('one');
    expect(l.numRequeues('one')).toBe(0);
    expect(l.when('one')).toBe(1);
  });

  it('TestItemExponentialFailureRateLimiterOverFlow', () => {
    let l = new ItemExponentialFailureRateLimiter(1, 1000 * 1000);
    for (let i = 0; i < 5; i++) l.when('one');
    expect(l.when('one')).toBe(32);
    for (let i = 0; i < 1000; i++) l.when('overflow1');
    expect(l.when('overflow1')).toBe(1000 * 1000);
    for (let i = 0; i < 2000; i++) l.when('overflow1');
    expect(l.when('overflow1')).toBe(1000 * 1000);

    l = new ItemExponentialFailureRateLimiter(60_000, 1000 * 3600_000);
    for (let i = 0; i < 2; i++) l.when('two');
    expect(l.when('two')).toBe(4 * 60_000);
    for (let i = 0; i < 1000; i++) l.when('overflow2');
    expect(l.when('overflow2')).toBe(1000 * 3600_000);
  });

  it('TestItemFastSlowRateLimiter', () => {
    const l = new ItemFastSlowRateLimiter(5, 10_000, 3);
    expect([1, 2, 3, 4, 5].map(() => l.when('one'))).toEqual([5, 5, 5, 10_000, 10_000]);
    expect(l.numRequeues('one')).toBe(5);
    expect([l.when('two'), l.when('two')]).toEqual([5, 5]);
    l.forget('one');
    expect(l.numRequeues('one')).toBe(0);
    expect(l.when('one')).toBe(5);
  });

  it('TestMaxOfRateLimiter', () => {
    const l = new MaxOfRateLimiter(
      new ItemFastSlowRateLimiter(5, 3000, 3),
      new ItemExponentialFailureRateLimiter(1, 1000),
    );
    expect([1, 2, 3, 4, 5].map(() => l.when('one'))).toEqual([5, 5, 5, 3000, 3000]);
    expect(l.numRequeues('one')).toBe(5);
    expect([l.when('two'), l.when('two')]).toEqual([5, 5]);
    expect(l.numRequeues('two')).toBe(2);
    l.forget('one');
    expect(l.numRequeues('one')).toBe(0);
    expect(l.when('one')).toBe(5);
  });

  it('BucketRateLimiter: burst, then one token per 1/qps, refilled over time', () => {
    const clock = new FakeClock();
    const l = new BucketRateLimiter(10, 100, clock);
    for (let i = 0; i < 100; i++) expect(l.when(`k${i}`)).toBe(0);
    expect(l.when('a')).toBeCloseTo(100);
    expect(l.when('b')).toBeCloseTo(200);
    clock.step(200); // pays back the two borrowed tokens
    expect(l.when('c')).toBeCloseTo(100);
    clock.step(60_000); // refills to the burst, never beyond
    for (let i = 0; i < 100; i++) expect(l.when(`j${i}`)).toBe(0);
    expect(l.when('d')).toBeCloseTo(100);
    expect(l.numRequeues('d')).toBe(0);
  });

  it('BucketRateLimiter.allow takes a token only when one is there (never goes into debt)', () => {
    const clock = new FakeClock();
    const l = new BucketRateLimiter(1, 2, clock);
    expect([l.allow(), l.allow(), l.allow(), l.allow()]).toEqual([true, true, false, false]);
    clock.step(999);
    expect(l.allow()).toBe(false);
    clock.step(1);
    expect(l.allow()).toBe(true);
    expect(l.allow()).toBe(false);
  });

  it('defaultControllerRateLimiter: max of 5 ms·2^n (cap 1000 s) and 10 qps / burst 100', () => {
    const clock = new FakeClock();
    const l = defaultControllerRateLimiter(clock);
    expect([1, 2, 3, 4].map(() => l.when('one'))).toEqual([5, 10, 20, 40]);
    for (let i = 0; i < 30; i++) l.when('one');
    expect(l.when('one')).toBe(1000 * 1000);
    // 35 tokens used so far; the bucket takes over once the burst of 100 is spent.
    for (let i = 0; i < 65; i++) l.when(`k${i}`);
    expect(l.when('fresh')).toBeCloseTo(100);
    l.forget('one');
    expect(l.numRequeues('one')).toBe(0);
  });
});
