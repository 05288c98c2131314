// What an expression reads of its bindings and input (runtime/engine/expression-needs.ts):
// the worker pool sends a worker only that, so the input cut down to what the syntax tree
// says is read must answer as the whole input does, on any expression.
import fc from 'fast-check';
import jsonata from 'jsonata';
import { describe, expect, it } from 'vitest';
import { needsOf, projection, type InputFields } from '../../runtime/engine/expression-needs.ts';

/** InputFields as a plain object, for toEqual. */
function plain(fields: InputFields | 'all'): unknown {
  if (fields === 'all') return 'all';
  return Object.fromEntries([...fields].map(([name, below]) => [name, plain(below)]));
}
const inputOf = (source: string): unknown => plain(needsOf(jsonata(source).ast()).input);

describe('what an expression reads of its input', () => {
  it('the subtrees at the plain names its paths start with', () => {
    expect(
      inputOf(
        '{ "id": body.orderId, "c": $uppercase(body.currency ? body.currency : "eur"), "by": metadata.consumer }',
      ),
    ).toEqual({ body: { orderId: 'all', currency: 'all' }, metadata: { consumer: 'all' } });
    expect(inputOf('total >= 1000')).toEqual({ total: 'all' });
    // A predicate, a sort, a group-by, `[]` or a step that is not a name end the names:
    // what follows is relative to that subtree.
    expect(inputOf('body.items[qty > 1].sku')).toEqual({ body: { items: 'all' } });
    expect(inputOf('$sum(body.items.(qty * price))')).toEqual({ body: { items: 'all' } });
    expect(inputOf('body.items^(>qty).sku')).toEqual({ body: { items: 'all' } });
    expect(inputOf('body.items{ sku: $sum(qty) }')).toEqual({ body: { items: 'all' } });
    expect(inputOf('a.b[]')).toEqual({ a: { b: 'all' } });
    expect(inputOf('a.b.c and a.b')).toEqual({ a: { b: 'all' } });
    // A lambda is evaluated in the context it was defined in.
    expect(inputOf('$map(body.items, function($i) { $i.sku & currency })')).toEqual({
      body: { items: 'all' },
      currency: 'all',
    });
    // Bindings only.
    expect(inputOf('$nodes.collect.report & $trigger.body.x')).toEqual({});
  });

  it('all of it where a path cannot say', () => {
    for (const source of [
      '$merge([$, { "ok": true }])',
      '$.body',
      '*.x',
      '**.x',
      'body.items[$$.limit]',
      'body.items.%.total',
      'body.items@$i.total',
      'body.items#$n.sku',
      '$eval("body")',
      '$ ~> | body | { "x": 1 } |',
    ]) {
      expect([source, inputOf(source)]).toEqual([source, 'all']);
    }
  });

  it('names the bindings it reads; $eval reads them all', () => {
    const bindingsOf = (source: string): string[] | 'all' => {
      const { bindings } = needsOf(jsonata(source).ast());
      return bindings === 'all' ? 'all' : [...bindings].sort();
    };
    expect(bindingsOf('$trigger.body.name')).toEqual(['trigger']);
    expect(bindingsOf('$merge([$nodes.a, { "x": $$.y, "z": $ }])')).toEqual(['merge', 'nodes']);
    expect(bindingsOf('body.items[qty > 1].sku')).toEqual([]);
    expect(bindingsOf('($f := function($v) { $v & $trigger.a }; $f(x))')).toEqual([
      'f',
      'trigger',
      'v',
    ]);
    expect(bindingsOf('x ?? $nodes.b')).toEqual(['exists', 'nodes']);
    expect(bindingsOf('$eval(body.code)')).toBe('all');
  });

  it('a projection keeps arrays and only the names read, own properties only', () => {
    const fields = needsOf(jsonata('a.b.c & x').ast()).input as InputFields;
    expect(
      projection(
        { a: [{ b: { c: 1, d: 2 } }, { b: [{ c: 3 }, 'y'] }, 7, null], x: { deep: 1 }, z: 9 },
        fields,
      ),
    ).toEqual({ a: [{ b: { c: 1 } }, { b: [{ c: 3 }, 'y'] }, 7, null], x: { deep: 1 } });
    expect(projection(Object.create({ a: 1 }) as unknown, fields)).toEqual({});
  });
});

const keys = ['a', 'b', 'qty', 'weird key'] as const;
const names = [...keys, 'constructor'];
const name = fc.constantFrom(...names).map((n) => (/^[a-z]+$/i.test(n) ? n : `\`${n}\``));

/**
 * JSON values whose objects hold each of a few keys half the time: dense enough that
 * what a cut-down input left out is often there to be missed.
 */
const json = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom(null, true, false, 0, 1, 2.5, '', 'text'),
    fc.record(Object.fromEntries(keys.map((k) => [k, tie('value')])), { requiredKeys: [] }),
    fc.array(tie('value'), { maxLength: 3 }),
  ),
})).value;

/** Expressions with what reaches the input in every way this file knows of, paths most. */
const expression = fc.letrec<{ expr: string; step: string; path: string }>((tie) => ({
  step: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    { arbitrary: name, weight: 6 },
    name.map((n) => `${n}[0]`),
    fc.tuple(name, name).map(([n, m]) => `${n}[${m} = 1]`),
    { arbitrary: fc.tuple(name, name).map(([n, m]) => `${n}[${m}]`), weight: 2 },
    fc.tuple(name, name).map(([n, m]) => `${n}[$exists(${m})]`),
    name.map((n) => `${n}[$$.a]`),
    name.map((n) => `${n}[]`),
    name.map((n) => `${n}^(${n})`),
    name.map((n) => `${n}@$f`),
    name.map((n) => `${n}#$i`),
    fc.constantFrom('*', '**', '%', '$', '$$'),
    tie('expr').map((e) => `(${e})`),
  ),
  path: fc
    .tuple(
      fc.oneof(
        { arbitrary: tie('step'), weight: 4 },
        fc.constantFrom('$trigger', '$v', '$string(a)'),
      ),
      fc.array(tie('step'), { maxLength: 3 }),
    )
    .map(([start, rest]) => [start, ...rest].join('.')),
  expr: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    { arbitrary: tie('path'), weight: 6 },
    fc.constantFrom('"s"', '1', 'null'),
    tie('expr').map((e) => `$count(${e})`),
    tie('expr').map((e) => `$string(${e})`),
    tie('expr').map((e) => `$keys(${e})`),
    fc.tuple(tie('expr'), tie('expr')).map(([e, f]) => `${e} & ${f}`),
    fc.tuple(tie('expr'), tie('expr'), tie('expr')).map(([c, t, e]) => `${c} ? ${t} : ${e}`),
    fc.tuple(tie('expr'), tie('expr')).map(([e, f]) => `{ "k": ${e}, "l": ${f} }`),
    fc.tuple(tie('expr'), tie('expr')).map(([e, f]) => `[${e}, ${f}]`),
    fc.tuple(tie('path'), name, tie('expr')).map(([p, n, e]) => `${p}{ ${n}: ${e} }`),
    fc.tuple(tie('expr'), tie('expr')).map(([e, f]) => `$map(${e}, function($v) { ${f} })`),
    fc.tuple(tie('expr'), tie('path')).map(([e, p]) => `($v := ${e}; ${p})`),
    fc.tuple(tie('expr'), name).map(([e, n]) => `${e} ~> | ${n} | { "z": 1 } |`),
    tie('expr').map((e) => `$eval("${e.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}")`),
  ),
}));

type Outcome = { ok: true; value: string } | { ok: false; code: string };

async function outcome(run: () => Promise<unknown>): Promise<Outcome> {
  try {
    const value = await run();
    return {
      ok: true,
      value: JSON.stringify({ v: value }, (_k, v: unknown) =>
        v === undefined ? '(undefined)' : typeof v === 'function' ? '(function)' : v,
      ),
    };
  } catch (error) {
    return { ok: false, code: String((error as { code?: unknown }).code ?? error) };
  }
}

describe('the input cut down to what an expression reads', () => {
  it('answers as the whole input, on random expressions and inputs', async () => {
    let cut = 0;
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(expression.expr, json, json, async (source, input, trigger) => {
        let compiled: jsonata.Expression;
        try {
          compiled = jsonata(source, { timeout: 1000, stack: 200 });
        } catch {
          return; // `%` where no parent can be derived, and the like
        }
        const { input: fields } = needsOf(compiled.ast());
        runs++;
        if (fields === 'all') return;
        cut++;
        const bindings = { trigger, nodes: {} };
        const whole = await outcome(() => compiled.evaluate(input, bindings));
        const part = await outcome(() => compiled.evaluate(projection(input, fields), bindings));
        expect({ source, outcome: part }).toEqual({ source, outcome: whole });
      }),
      { numRuns: 4000 },
    );
    // Not vacuous: many expressions read only part of their input.
    expect(cut / runs).toBeGreaterThan(0.2);
  }, 120_000);
});
