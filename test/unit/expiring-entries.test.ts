import { describe, expect, it } from 'vitest';
import { ExpiringEntries } from '../../runtime/engine/expiring-entries.ts';

describe('ExpiringEntries', () => {
  it('keeps the order entries were set in, sums their bytes, and expires the oldest first up to one that lives on', () => {
    const entries = new ExpiringEntries<{ until: number; bytes: number }>();
    entries.set('a', { until: 10, bytes: 3 });
    entries.set('b', { until: 30, bytes: 5 });
    entries.set('c', { until: 20, bytes: 7 });
    // Set again: last in the order, its old bytes gone.
    entries.set('a', { until: 40, bytes: 2 });
    expect([...entries.entries()].map(([id]) => id)).toEqual(['b', 'c', 'a']);
    expect(entries.bytes).toBe(14);
    const c = entries.get('c');
    if (!c) throw new Error('c is held');
    entries.resize(c, 1);
    expect(entries.bytes).toBe(8);
    // b lives on at 25, so c (over at 20) stays behind it.
    expect(entries.expire((until) => until < 25)).toEqual([]);
    expect(entries.expire((until) => until <= 30).map((e) => e.until)).toEqual([30, 20]);
    expect(entries.size).toBe(1);
    expect(entries.bytes).toBe(2);
    expect(entries.delete('a')).toEqual({ until: 40, bytes: 2 });
    expect(entries.delete('a')).toBeUndefined();
    expect(entries.bytes).toBe(0);
  });
});
