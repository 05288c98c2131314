// The run queue's order (runtime/engine/fair-queue.ts, ADR 0049), without an engine.
import { describe, expect, it } from 'vitest';
import { FairQueue, NO_NAMESPACE } from '../../runtime/engine/fair-queue.ts';

/** Takes `n` items (each then holds a slot of its namespace). */
function take(queue: FairQueue<string>, n: number): (string | undefined)[] {
  return Array.from({ length: n }, () => queue.take());
}

describe('FairQueue', () => {
  it('one namespace: arrival order, and its slots counted until finished', () => {
    const q = new FairQueue<string>();
    for (const x of ['a1', 'a2', 'a3']) q.push('a', x);
    expect(q.length).toBe(3);
    expect(take(q, 4)).toEqual(['a1', 'a2', 'a3', undefined]);
    expect(q.runningIn('a')).toBe(3);
    expect(q.namespaces).toBe(1);
    for (let i = 0; i < 3; i++) q.finished('a');
    expect(q.runningIn('a')).toBe(0);
    // Nothing held, nothing waiting: the bucket goes (no growth with namespaces seen once).
    expect(q.namespaces).toBe(0);
  });

  it('the next slot goes to the namespace holding the fewest; ties to the oldest waiting', () => {
    const q = new FairQueue<string>();
    for (const x of ['a1', 'a2', 'a3', 'a4']) q.push('a', x);
    q.push('b', 'b1');
    q.push('b', 'b2');
    q.push('c', 'c1');
    // a1 (all hold 0: the oldest), then b1 and c1 (0 against a's 1), then a2 (all hold 1,
    // a2 came before b2), b2, then a (2) against nobody else waiting.
    expect(take(q, 7)).toEqual(['a1', 'b1', 'c1', 'a2', 'b2', 'a3', 'a4']);
    expect([q.runningIn('a'), q.runningIn('b'), q.runningIn('c')]).toEqual([4, 2, 1]);
  });

  it('a namespace holding every slot: the newcomer gets the next one that frees', () => {
    const q = new FairQueue<string>();
    for (let i = 1; i <= 10; i++) q.push('a', `a${i}`);
    take(q, 4);
    q.push('b', 'b1');
    q.push('b', 'b2');
    q.finished('a');
    expect(q.take()).toBe('b1');
    q.finished('a');
    // a holds 2, b 1: b again.
    expect(q.take()).toBe('b2');
    q.finished('a');
    expect(q.take()).toBe('a5');
  });

  it('counts what waits per namespace, and the namespaces waiting', () => {
    const q = new FairQueue<string>();
    q.push('a', 'a1');
    q.push('a', 'a2');
    q.push(NO_NAMESPACE, 'x1');
    expect([q.waitingIn('a'), q.waitingIn(NO_NAMESPACE), q.waitingIn('b')]).toEqual([2, 1, 0]);
    expect(q.namespacesWaiting).toBe(2);
    expect(q.take()).toBe('a1');
    expect(q.take()).toBe('x1');
    expect(q.namespacesWaiting).toBe(1);
    expect(q.namespaces).toBe(2);
  });

  it('remove and drain take out waiting items, oldest first, and leave the slots held', () => {
    const q = new FairQueue<string>();
    q.push('a', 'a1');
    q.push('b', 'b1');
    q.push('a', 'a2');
    q.push('b', 'b2');
    expect(q.take()).toBe('a1');
    expect(q.remove((x) => x.endsWith('2'))).toEqual(['a2', 'b2']);
    expect(q.length).toBe(1);
    expect(q.namespacesWaiting).toBe(1);
    expect(q.runningIn('a')).toBe(1);
    q.push('a', 'a3');
    expect(q.drain()).toEqual(['b1', 'a3']);
    expect([q.length, q.namespacesWaiting]).toEqual([0, 0]);
    // b held no slot and waits no more: gone; a still holds one.
    expect(q.namespaces).toBe(1);
    expect(q.take()).toBeUndefined();
  });

  it('keeps its order through compaction of a long queue', () => {
    const q = new FairQueue<number>();
    for (let i = 0; i < 5000; i++) q.push('a', i);
    const out: number[] = [];
    for (let i = 0; i < 3000; i++) {
      out.push(q.take() as number);
      q.finished('a');
    }
    for (let i = 5000; i < 6000; i++) q.push('a', i);
    for (let x = q.take(); x !== undefined; x = q.take()) out.push(x);
    expect(out).toEqual(Array.from({ length: 6000 }, (_, i) => i));
  });
});
