// A worker's result carried back with references to what it shares with its input and
// bindings (runtime/engine/expression-sharing.ts), and put together again in the pool.
import { describe, expect, it } from 'vitest';
import {
  indexOf,
  withSharedRefs,
  withSharedValues,
} from '../../runtime/engine/expression-sharing.ts';

describe('shared values of a result', () => {
  it('go as references and come back as the pool’s own, the rest as carried', () => {
    // What the worker has (its copies) and what the pool has (the originals): alike.
    const make = () => ({ body: { items: [{ sku: 'a' }, { sku: 'b' }], name: 'ada' } });
    const workerInput = make();
    const poolInput = make();
    const workerNodes = { a: { total: 3 } };
    const poolNodes = { a: { total: 3 } };
    const sequence = Object.assign([workerInput.body.items[1], 'x'], { sequence: true });
    const result = {
      merged: { ...workerInput.body, ok: true },
      items: sequence,
      node: workerNodes.a,
      fresh: { n: 1 },
    };
    const sources = {
      roots: ['$', 'nodes'],
      index: (root: string) => indexOf(root === '$' ? workerInput : workerNodes),
    };
    const carried = withSharedRefs(result, sources);
    // The result itself is not changed; what shares nothing is carried as it is.
    expect(result.merged.items).toBe(workerInput.body.items);
    expect((carried.value as typeof result).fresh).toBe(result.fresh);
    expect((carried.value as typeof result).items).toMatchObject({ sequence: true });
    expect(carried.refs).toEqual([
      { at: ['merged', 'items'], root: '$', path: ['body', 'items'] },
      { at: ['items', '0'], root: '$', path: ['body', 'items', '1'] },
      { at: ['node'], root: 'nodes', path: ['a'] },
    ]);
    const back = withSharedValues(structuredClone(carried.value), carried.refs, (root) =>
      root === '$' ? poolInput : poolNodes,
    ) as typeof result;
    expect(back).toEqual(result);
    expect(back.merged.items).toBe(poolInput.body.items);
    expect(back.items[0]).toBe(poolInput.body.items[1]);
    expect(back.node).toBe(poolNodes.a);
  });

  it('a result that is a source value is a reference at the top; primitives carry none', () => {
    const input = { a: { b: 1 } };
    const sources = { roots: ['$'], index: () => indexOf(input) };
    expect(withSharedRefs(input.a, sources)).toEqual({
      value: null,
      refs: [{ at: [], root: '$', path: ['a'] }],
    });
    expect(withSharedRefs('text', sources)).toEqual({ value: 'text', refs: [] });
    const other = { a: { b: 1 } };
    expect(withSharedValues(null, [{ at: [], root: '$', path: ['a'] }], () => other)).toBe(other.a);
  });
});
