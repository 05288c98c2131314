// jsonEqual answers as a comparison of two JSON round trips would.
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import { jsonEqual } from '../../operator/controller/json-equal.ts';

const roundTrip = (v: unknown): unknown => (v === undefined ? v : JSON.parse(JSON.stringify(v)));

describe('jsonEqual', () => {
  const cases: [unknown, unknown][] = [
    [{ a: 1, b: undefined }, { a: 1 }],
    [{ a: 1 }, { a: 1, b: 2 }],
    [{ a: [1, { b: 'x', c: undefined }] }, { a: [1, { b: 'x' }] }],
    [
      [1, undefined],
      [1, null],
    ],
    [
      [1, 2],
      [1, 2, 3],
    ],
    [{ a: null }, { a: undefined }],
    [{ a: { b: 1 } }, { a: { b: '1' } }],
    [{}, []],
    ['x', 'x'],
    [undefined, undefined],
    [
      { conditions: [{ type: 'Ready', status: 'True' }] },
      { conditions: [{ status: 'True', type: 'Ready' }] },
    ],
  ];
  it.each(cases)('%j vs %j', (a, b) => {
    expect(jsonEqual(a, b)).toBe(isDeepStrictEqual(roundTrip(a), roundTrip(b)));
  });
});
