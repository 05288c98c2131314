// The delaying queue's waiting room against a plain reference: same keys, same order.
import { describe, expect, it } from 'vitest';
import { DelayHeap } from '../../operator/controller/delay-heap.ts';

/** The obvious implementation: a map scanned and sorted on every take. */
class Reference {
  readonly waiting = new Map<string, { readyAt: number; seq: number }>();
  seq = 0;
  add(key: string, readyAt: number): void {
    const existing = this.waiting.get(key);
    if (existing && existing.readyAt <= readyAt) return;
    this.waiting.set(key, { readyAt, seq: this.seq++ });
  }
  takeReady(now: number): string[] {
    const ready = [...this.waiting]
      .filter(([, w]) => w.readyAt <= now)
      .sort(([, a], [, b]) => a.readyAt - b.readyAt || a.seq - b.seq)
      .map(([k]) => k);
    for (const k of ready) this.waiting.delete(k);
    return ready;
  }
  nextAt(): number | undefined {
    let next: number | undefined;
    for (const w of this.waiting.values())
      if (next === undefined || w.readyAt < next) next = w.readyAt;
    return next;
  }
}

describe('DelayHeap', () => {
  it('hands out ready keys earliest first, first added first on ties; an earlier add wins', () => {
    const h = new DelayHeap();
    h.add('b', 20);
    h.add('a', 10);
    h.add('c', 10);
    h.add('b', 5); // moved up
    h.add('a', 30); // later: ignored
    expect(h.nextAt()).toBe(5);
    expect(h.takeReady(10)).toEqual(['b', 'a', 'c']);
    expect(h.size).toBe(0);
    expect(h.nextAt()).toBeUndefined();
  });

  it('matches the reference over 20,000 random operations', () => {
    let seed = 42;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const h = new DelayHeap();
    const r = new Reference();
    let now = 0;
    for (let i = 0; i < 20_000; i++) {
      if (random() < 0.7) {
        const key = `k${Math.floor(random() * 500)}`;
        const at = now + Math.floor(random() * 1000);
        h.add(key, at);
        r.add(key, at);
      } else {
        now += Math.floor(random() * 50);
        expect(h.takeReady(now)).toEqual(r.takeReady(now));
      }
      expect(h.nextAt()).toBe(r.nextAt());
      expect(h.size).toBe(r.waiting.size);
    }
  });
});
