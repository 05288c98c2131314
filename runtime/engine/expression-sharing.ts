// A worker's result, with the parts it shares with what the pool sent it carried back
// as references (ADR 0048, amended 2026-11-28 (night)). `$merge([$, { "ok": true }])`
// on a 64 KB record is a new object of one more key whose values are the record's own:
// in the engine's process JSONata's answer shares them with the input; from a worker,
// copied back whole, it cost the engine's event loop 400 µs. The worker puts a
// reference (the root it came from, `$` or a binding, and the path in it) where a value
// of its result is a value of its input or bindings, and the pool puts its own copy of
// that value there: the answer shares with the input as JSONata's in-process answer does,
// and only what the expression made goes over.

/** A key of an object, or an index of an array. */
type Key = string;

/** Where a result's value was: `$` (the input) or a binding, and the path in it. */
export interface SharedRef {
  /** Where it goes in the carried result ([] for the result itself). */
  at: Key[];
  /** `$` or a binding's name. */
  root: string;
  path: Key[];
}

/** Each object of a value by identity, with its path in the value. */
export type ValueIndex = Map<object, Key[]>;

/** The objects and arrays of `value`, each with its path (the first found, for a value met twice). */
export function indexOf(value: unknown): ValueIndex {
  const index: ValueIndex = new Map();
  const pending: [unknown, Key[]][] = [[value, []]];
  while (pending.length > 0) {
    const [v, path] = pending.pop() as [unknown, Key[]];
    if (v === null || typeof v !== 'object' || index.has(v)) continue;
    index.set(v, path);
    for (const [key, child] of Object.entries(v)) pending.push([child, [...path, key]]);
  }
  return index;
}

/** The roots a result may share with: `$` and the bindings, each with its index (made when first asked). */
export interface SharedSources {
  /** The index of the root named `root` (`$` or a binding), undefined when it has no objects. */
  index(root: string): ValueIndex | undefined;
  roots: readonly string[];
}

/**
 * `result` with every value that is one of the sources' (by identity) replaced by null,
 * and the references that put them back. The objects around them are new copies (the
 * result is not changed); what shares nothing is returned as it is.
 */
export function withSharedRefs(
  result: unknown,
  sources: SharedSources,
): { value: unknown; refs: SharedRef[] } {
  const refs: SharedRef[] = [];
  if (result === null || typeof result !== 'object') return { value: result, refs };
  const seen = new Set<object>();
  const at: Key[] = [];
  const find = (v: object): Omit<SharedRef, 'at'> | undefined => {
    for (const root of sources.roots) {
      const path = sources.index(root)?.get(v);
      if (path) return { root, path };
    }
    return undefined;
  };
  const visit = (v: unknown): unknown => {
    if (v === null || typeof v !== 'object') return v;
    const found = find(v);
    if (found) {
      refs.push({ at: [...at], ...found });
      return null;
    }
    if (seen.has(v)) return v;
    seen.add(v);
    let copy: Record<Key, unknown> | undefined;
    for (const [key, child] of Object.entries(v)) {
      at.push(key);
      const carried = visit(child);
      at.pop();
      if (carried !== child) {
        // Arrays keep what JSONata marks its sequences with (own keys past the indexes).
        copy ??= (Array.isArray(v) ? Object.assign([], v) : { ...v }) as Record<Key, unknown>;
        copy[key] = carried;
      }
    }
    return copy ?? v;
  };
  return { value: visit(result), refs };
}

/** The value at `path` of `root`. */
function at(root: unknown, path: readonly Key[]): unknown {
  let v = root;
  for (const key of path) v = (v as Record<Key, unknown>)[key];
  return v;
}

/** The carried result with the pool's own values put back where the references say. */
export function withSharedValues(
  value: unknown,
  refs: readonly SharedRef[],
  root: (name: string) => unknown,
): unknown {
  let result = value;
  for (const ref of refs) {
    const shared = at(root(ref.root), ref.path);
    if (ref.at.length === 0) {
      result = shared;
      continue;
    }
    const holder = at(result, ref.at.slice(0, -1)) as Record<Key, unknown>;
    holder[ref.at[ref.at.length - 1] as Key] = shared;
  }
  return result;
}
