import { describe, expect, it } from 'vitest';
import { isoTime } from '../../runtime/gateway/clock.ts';

describe('isoTime', () => {
  it('is Date#toISOString, whatever the order of the milliseconds asked for', () => {
    const now = Date.now();
    for (const ms of [now, now, now + 1, now, 0, 0, -1, 8.64e15, now + 1]) {
      expect(isoTime(ms)).toBe(new Date(ms).toISOString());
    }
  });

  it('throws for an invalid time, as toISOString does', () => {
    expect(() => isoTime(Number.NaN)).toThrow(RangeError);
  });
});
