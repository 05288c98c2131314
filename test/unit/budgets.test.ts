// Byte budgets from settings, and the size estimate the stores count with.
import { describe, expect, it } from 'vitest';
import { parseBytes } from '../../runtime/bounded.ts';
import {
  boundExecution,
  cutPart,
  jsonBytes,
  recordBytes,
  utf8Prefix,
} from '../../runtime/engine/record-bounds.ts';
import type { Execution } from '../../runtime/engine/ports.ts';
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

  it('reads the caps on open event streams: whole numbers from 1 to a million', () => {
    expect(
      budgetSettings({
        HOOKGATE_STREAMS_PER_EXECUTION: '4',
        HOOKGATE_STREAMS_PER_PROCESS: '2500',
      }),
    ).toEqual({ budgets: { streamsPerExecution: 4, streamsPerProcess: 2500 }, problems: [] });
    for (const raw of ['0', '-1', '1.5', '16Ki', '', '1000001']) {
      expect(budgetSettings({ HOOKGATE_STREAMS_PER_EXECUTION: raw }).problems).toEqual([
        `HOOKGATE_STREAMS_PER_EXECUTION must be an integer from 1 to 1000000, not "${raw}"`,
      ]);
    }
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

  it('a walk that ends early, throws, or measures from inside another walk leaves the next walk right', () => {
    const value = { a: 'x'.repeat(10), b: [1, 2, 3], c: { d: null } };
    const alone = jsonBytes(value);
    expect(
      jsonBytes(
        Array.from({ length: 100 }, () => value),
        10,
      ),
    ).toBeGreaterThan(10);
    const throwing = {
      get bad(): never {
        throw new Error('getter');
      },
      rest: [value, value],
    };
    expect(() => jsonBytes(throwing)).toThrow('getter');
    let inner = 0;
    const measuring = {
      get nested() {
        inner = jsonBytes(value);
        return 'n';
      },
      after: value,
    };
    expect(jsonBytes(measuring)).toBe(2 + 'nested'.length + 4 + 3 + 'after'.length + 4 + alone);
    expect(inner).toBe(alone);
    expect(jsonBytes(value)).toBe(alone);
  });
});

describe('the record a store keeps', () => {
  const input = (body: unknown): Execution['input'] => ({
    body,
    headers: { 'content-type': 'application/json' },
    query: {},
    params: {},
    metadata: {
      timestamp: '2026-11-27T00:00:00.000Z',
      correlationId: 'c',
      requestId: 'r',
      executionId: 'e1',
      method: 'POST',
      path: '/webhook/p',
      route: '/webhook/p',
      contentType: 'application/json',
      triggerKey: 'ns/t',
      workflowId: 'w',
    },
  });
  const record = (given: Execution['input'], status: Execution['status']): Execution => ({
    id: 'e1',
    workflowId: 'w',
    triggerKey: 'ns/t',
    status,
    createdAt: '2026-11-27T00:00:00.000Z',
    input: given,
    log: [],
  });

  it('cuts one input to each budget it is saved under, as often as it is saved', () => {
    const given = input({ text: 'x'.repeat(3000) });
    const whole = JSON.stringify(given.body).length;
    for (const status of ['queued', 'succeeded', 'succeeded'] as const) {
      const small = boundExecution(record(given, status), 100);
      expect(small.truncated).toEqual({ 'input.body': whole });
      expect(small.input.body).toBe(JSON.stringify(given.body).slice(0, 100));
      expect(boundExecution(record(given, status), 10_000).input).toBe(given);
      const large = boundExecution(record(given, status), 1000);
      expect((large.input.body as string).length).toBe(1000);
      // The cut copy saved again is kept as it is, still saying what was cut.
      expect(boundExecution(small, 100).input).toBe(small.input);
      expect(boundExecution(small, 100).truncated).toEqual({ 'input.body': whole });
    }
  });

  it("counts what it keeps, and leaves the caller's input as it was: same keys, same JSON, equal to a copy", () => {
    const given = input({ orderId: 'A-1', total: 3 });
    const copy = structuredClone(given);
    const kept = boundExecution(record(given, 'succeeded'), 1024);
    expect(kept.input).toBe(given);
    expect(recordBytes(kept)).toBe(recordBytes(record(copy, 'succeeded')));
    expect(given).toEqual(copy);
    expect(Reflect.ownKeys({ ...given })).toEqual(Reflect.ownKeys(copy));
    expect(JSON.stringify(given)).toBe(JSON.stringify(copy));
  });

  it('the cut record reaches nothing of the whole body (its marks included)', () => {
    const body = { text: 'z'.repeat(5000) };
    const given = input(body);
    for (const status of ['queued', 'succeeded'] as const) {
      const kept = boundExecution(record(given, status), 100);
      expect(reaches(kept, body)).toBe(false);
      expect(reaches(boundExecution(kept, 100), body)).toBe(false);
    }
    expect(reaches(given, body)).toBe(true); // the walk does find what is there
  });

  it('a frozen input is bounded and counted all the same', () => {
    const given = Object.freeze(input({ text: 'y'.repeat(500) }));
    const kept = boundExecution(record(given, 'succeeded'), 100);
    expect(kept.truncated).toEqual({ 'input.body': JSON.stringify(given.body).length });
    expect(recordBytes(boundExecution(record(given, 'succeeded'), 1000))).toBe(
      recordBytes(record(input({ text: 'y'.repeat(500) }), 'succeeded')),
    );
  });
});

/** Whether `target` is reachable from `from` through own properties, symbols and hidden ones included. */
function reaches(from: unknown, target: object): boolean {
  const seen = new Set<object>();
  const stack: unknown[] = [from];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v !== 'object' || v === null || seen.has(v)) continue;
    if (v === target) return true;
    seen.add(v);
    for (const key of Reflect.ownKeys(v)) {
      const d = Object.getOwnPropertyDescriptor(v, key);
      if (d && 'value' in d) stack.push(d.value);
    }
  }
  return false;
}
