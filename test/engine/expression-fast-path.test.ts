// The expression fast path must give JSONata's answer wherever it answers: random
// expressions of the subset (and a few beyond it) over random inputs, each evaluated
// by the engine's ExpressionCache and by JSONata itself.
import fc from 'fast-check';
import jsonata from 'jsonata';
import { describe, expect, it } from 'vitest';
import { fastPathOf, UNDECIDED } from '../../runtime/engine/expression-fast-path.ts';
import { ExpressionCache } from '../../runtime/engine/expressions.ts';

const names = ['a', 'b', 'body', 'total', 'constructor', 'toString', 'length', 'weird key'];
const quoted = (name: string) => (/^[a-z]+$/i.test(name) ? name : `\`${name}\``);

/** JSON values over a few keys, arrays and nulls included. */
const json = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom(null, true, false, 0, 1.5, -3, '', 'text'),
    fc.dictionary(fc.constantFrom(...names), tie('value'), { maxKeys: 4 }),
    fc.array(tie('value'), { maxLength: 3 }),
  ),
})).value;

const expression = fc.letrec<{ expr: string; path: string }>((tie) => ({
  path: fc
    .tuple(
      fc.constantFrom('$', '$trigger', '$nodes', '$missing', '$string', ...names.map(quoted)),
      fc.array(fc.constantFrom(...names.map(quoted)), { maxLength: 3 }),
    )
    .map(([start, rest]) => [start, ...rest].join('.')),
  expr: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    tie('path'),
    fc.constantFrom('"s"', '42', '1.5', 'true', 'false', 'null', '{}'),
    fc
      .array(fc.tuple(fc.constantFrom('k', 'l', 'm', '__proto__'), tie('expr')), { maxLength: 3 })
      .map((pairs) => `{ ${pairs.map(([k, v]) => `"${k}": ${v}`).join(', ')} }`),
    // Beyond the subset: left to JSONata.
    tie('path').map((p) => `${p}[0]`),
    tie('path').map((p) => `$count(${p})`),
  ),
}));

type Outcome = { ok: true; value: string } | { ok: false; code: string };

async function outcome(run: () => Promise<unknown>): Promise<Outcome> {
  try {
    // Through JSON (JSONata's sequences carry a marker property plain arrays do not),
    // with a key whose value is undefined told apart from a missing one.
    const value = await run();
    return {
      ok: true,
      value: JSON.stringify({ v: value }, (_k, v: unknown) =>
        v === undefined ? '(undefined)' : v,
      ),
    };
  } catch (error) {
    return { ok: false, code: String((error as { code?: unknown }).code ?? error) };
  }
}

describe('expression fast path', () => {
  it('answers as JSONata does, on random expressions and inputs', async () => {
    const cache = new ExpressionCache();
    let decided = 0;
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(expression.expr, json, json, async (source, input, trigger) => {
        const bindings = { trigger, nodes: { a: trigger } };
        const expected = await outcome(() => jsonata(source).evaluate(input, bindings));
        const actual = await outcome(() => cache.evaluate('scope', source, input, bindings));
        expect(actual.ok ? actual : { ok: false }).toEqual(expected.ok ? expected : { ok: false });
        const fast = fastPathOf(jsonata(source));
        runs++;
        if (fast && fast(input, bindings) !== UNDECIDED) decided++;
      }),
      { numRuns: 3000 },
    );
    // Not vacuous: a good share went the fast way.
    expect(decided / runs).toBeGreaterThan(0.3);
  });

  it('covers field mappings, and leaves the rest to JSONata', () => {
    const fast = (source: string) => fastPathOf(jsonata(source));
    for (const source of [
      '{ "orderId": body.orderId, "total": body.total }',
      '$trigger.body.x',
      '{ "a": { "b": $.c }, "d": null, "e": "s", "f": 1 }',
      '`weird key`.x',
    ])
      expect([source, typeof fast(source)]).toEqual([source, 'function']);
    for (const source of ['body.items[0]', '$count(a)', 'a + 1', '{ "a": 1, "a": 2 }', 'a.*'])
      expect([source, fast(source)]).toEqual([source, undefined]);
    const mapping = fast('{ "id": body.orderId, "n": body.missing, "t": $trigger.t }');
    expect(mapping?.({ body: { orderId: 'A-1' } }, { trigger: { t: 3 } })).toEqual({
      id: 'A-1',
      t: 3,
    });
    // Arrays and inherited names: JSONata decides.
    expect(mapping?.({ body: [{ orderId: 'A-1' }] }, { trigger: {} })).toBe(UNDECIDED);
    expect(fast('body.constructor')?.({ body: {} }, {})).toBe(UNDECIDED);
  });
});
