// Byte budgets from settings, and the size estimate the stores count with.
import { describe, expect, it } from 'vitest';
import { parseBytes } from '../../runtime/bounded.ts';
import { cutPart, jsonBytes, utf8Prefix } from '../../runtime/engine/record-bounds.ts';
import { budgetSettings } from '../../roles/budget-settings.ts';

describe('byte sizes in settings', () => {
  it.each([
    ['1024', 1024],
    ['64Ki', 65_536],
    ['64KiB', 65_536],
    ['256Mi', 268_435_456],
    ['1gb', 1_073_741_824],
    ['1.5k', 1536],
  ])('%s = %d bytes', (raw, bytes) => expect(parseBytes(raw)).toBe(bytes));

  it.each(['', 'x', '-1', '12 potatoes', '1e3', '64Kx'])('"%s" is not a size', (raw) =>
    expect(parseBytes(raw)).toBeUndefined(),
  );

  it('reads every budget, and names the bad ones', () => {
    expect(
      budgetSettings({
        HOOKGATE_EXECUTION_STORE_BYTES: '32Mi',
        HOOKGATE_STORED_BODY_BYTES: '16Ki',
        HOOKGATE_EXECUTION_TTL_MS: '3600000',
        HOOKGATE_LIST_PAGE_BYTES: '1Mi',
        HOOKGATE_ANALYTICS_BYTES: '8Mi',
      }),
    ).toEqual({
      budgets: {
        executionStoreBytes: 33_554_432,
        storedBodyBytes: 16_384,
        executionTtlMs: 3_600_000,
        listPageBytes: 1_048_576,
        analyticsBytes: 8_388_608,
      },
      problems: [],
    });
    expect(budgetSettings({ HOOKGATE_IDEMPOTENCY_BYTES: '10' }).problems).toEqual([
      'HOOKGATE_IDEMPOTENCY_BYTES must be a size of at least 1Ki (e.g. 64Ki, 256Mi), not "10"',
    ]);
  });
});

describe('JSON size estimate', () => {
  const samples: unknown[] = [
    { a: 1, b: 'text', c: [true, null, { d: 'é' }] },
    'x'.repeat(5000),
    Array.from({ length: 300 }, (_, i) => ({ id: i, name: `item-${i}` })),
  ];
  it.each(samples.map((s, i) => [i, s]))(
    'sample %i: within a third of the real JSON size',
    (_i, value) => {
      const real = Buffer.byteLength(JSON.stringify(value));
      const estimate = jsonBytes(value);
      expect(estimate).toBeGreaterThan(real * 0.66);
      expect(estimate).toBeLessThan(real * 1.5);
    },
  );

  it('stops early once past the limit: a huge array is not walked', () => {
    let read = 0;
    const huge = new Proxy(new Array<number>(1_000_000).fill(1), {
      get(target, key, receiver) {
        if (typeof key === 'string' && /^\d+$/.test(key)) read++;
        return Reflect.get(target, key, receiver) as unknown;
      },
    });
    expect(jsonBytes(huge, 1000)).toBeGreaterThan(1000);
    expect(read).toBeLessThan(1000);
    expect(jsonBytes([1, 2, 3])).toBeLessThan(1000);
  });

  it('cuts on character boundaries and reports the whole size', () => {
    expect(utf8Prefix('aé', 2)).toBe('a');
    expect(utf8Prefix('😀😀', 5)).toBe('😀');
    expect(cutPart('small', 10)).toBeUndefined();
    expect(cutPart({ k: 'v'.repeat(20) }, 10)).toEqual({
      cut: '{"k":"vvvv',
      size: 28,
    });
  });
});
