import { describe, expect, it } from 'vitest';
import { Batch } from '../../runtime/analytics/batch.ts';

describe('Batch', () => {
  it('applies queued items in order on the next turn of the event loop', async () => {
    const seen: number[] = [];
    const batch = new Batch<number>((n) => seen.push(n));
    batch.push(1);
    batch.push(2);
    expect(seen).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen).toEqual([1, 2]);
    batch.push(3);
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen).toEqual([1, 2, 3]);
  });

  it('flush() applies everything at once, and a later turn finds nothing left', async () => {
    const seen: number[] = [];
    const batch = new Batch<number>((n) => seen.push(n));
    batch.push(1);
    batch.flush();
    expect(seen).toEqual([1]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen).toEqual([1]);
  });

  it('an item that throws is dropped; the others still count', () => {
    const seen: number[] = [];
    const batch = new Batch<number>((n) => {
      if (n === 2) throw new TypeError('bad');
      seen.push(n);
    });
    for (const n of [1, 2, 3]) batch.push(n);
    batch.flush();
    expect(seen).toEqual([1, 3]);
  });
});
