// The CEL environment of validation rules: the standard library and strings extension
// of @bufbuild/cel, with Kubernetes' order-insensitive equality for `set`/`map` lists,
// optionals for `optionalOldSelf` (`oldSelf.hasValue()`, `.value()`, `.orValue(x)`,
// `optional.of(x)`, `optional.none()`) and part of Kubernetes' list library.
import {
  celEnv,
  celFunc,
  celMap,
  celMethod,
  CelScalar,
  isCelError,
  listType,
  parse,
  plan,
  type CelList,
  type CelResult,
  type CelValue,
} from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';
import { celEqual } from './structural-cel-values.ts';

const { DYN, BOOL, INT } = CelScalar;

const optionalContents = new WeakMap<object, CelValue | undefined>();
const OPTIONAL = celMap(new Map([['optional', true]]));

/** An optional value (`undefined`: none), for `oldSelf` under `optionalOldSelf`. */
export function celOptional(value: CelValue | undefined): CelValue {
  const m = celMap(new Map([['hasValue', value !== undefined]]));
  optionalContents.set(m, value);
  return m;
}

function contentOf(v: CelValue): CelValue | undefined {
  if (typeof v !== 'object' || v === null || !optionalContents.has(v)) {
    throw new Error('no such overload: not an optional');
  }
  return optionalContents.get(v);
}

function ordered(list: CelList): (bigint | number | string)[] {
  return [...list].map((v) => {
    if (typeof v === 'bigint' || typeof v === 'number' || typeof v === 'string') return v;
    throw new Error('no such overload: list elements are not comparable');
  });
}

const funcs = [
  ...strings,
  celFunc('_==_', [DYN, DYN], BOOL, (a, b) => celEqual(a, b)),
  celFunc('_!=_', [DYN, DYN], BOOL, (a, b) => !celEqual(a, b)),
  celMethod('hasValue', DYN, [], BOOL, function () {
    return contentOf(this) !== undefined;
  }),
  celMethod('value', DYN, [], DYN, function () {
    const v = contentOf(this);
    if (v === undefined) throw new Error('optional.none() dereference');
    return v;
  }),
  celMethod('orValue', DYN, [DYN], DYN, function (fallback) {
    return contentOf(this) ?? fallback;
  }),
  celMethod('of', DYN, [DYN], DYN, function (v) {
    if (this !== OPTIONAL) throw new Error('no such overload');
    return celOptional(v);
  }),
  celMethod('none', DYN, [], DYN, function () {
    if (this !== OPTIONAL) throw new Error('no such overload');
    return celOptional(undefined);
  }),
  celMethod('isSorted', listType(DYN), [], BOOL, function () {
    const xs = ordered(this);
    return xs.every((x, i) => i === 0 || (xs[i - 1] as typeof x) <= x);
  }),
  celMethod('indexOf', listType(DYN), [DYN], INT, function (x) {
    return BigInt([...this].findIndex((v) => celEqual(v, x)));
  }),
];

const env = celEnv({ funcs });

/** Whether a function name is defined (or handled by the planner itself). */
export function knownFunction(name: string): boolean {
  return (
    ['_&&_', '_||_', '_?_:_', '_[_]', '@not_strictly_false'].includes(name) ||
    env.funcs.find(name) !== undefined
  );
}

export type Outcome = { ok: true; value: CelValue } | { ok: false; message: string };
const programs = new Map<string, ((b: Record<string, CelValue>) => CelResult) | Error>();

/** Evaluate an expression with `self` (and `oldSelf`) bound; `optional` is always bound. */
export function evaluate(expr: string, bindings: Record<string, CelValue>): Outcome {
  let program = programs.get(expr);
  if (!program) {
    try {
      program = plan(env, parse(expr));
    } catch (err) {
      program = err instanceof Error ? err : new Error(String(err));
    }
    programs.set(expr, program);
  }
  if (program instanceof Error) return { ok: false, message: program.message };
  try {
    const value = program({ optional: OPTIONAL, ...bindings });
    return isCelError(value) ? { ok: false, message: value.message } : { ok: true, value };
  } catch (err) {
    return { ok: false, message: err instanceof Error ? err.message : String(err) };
  }
}
