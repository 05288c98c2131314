// The CEL environment of validation rules: the standard library and the strings
// extension of `@bufbuild/cel`, plus what Kubernetes adds and the rules here need:
// order-insensitive equality for set/map lists, optionals (for `optionalOldSelf`), the
// list library (isSorted, sum, min, max, indexOf, lastIndexOf) and the regex library
// (find, findAll). Not modelled: the url, ip, cidr, quantity, semver and format
// libraries, and cost limits.
import {
  celEnv,
  celFunc,
  celList,
  celMethod,
  CelScalar,
  isCelError,
  listType,
  parse,
  plan,
  type CelEnv,
  type CelList,
  type CelResult,
  type CelValue,
} from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';
import { celEquals, celOptional, OPTIONAL_NAMESPACE, optionalContent } from './cel-values.ts';
import { compilePattern } from './formats.ts';

const { DYN, BOOL, STRING, INT } = CelScalar;
const LIST = listType(DYN);

function content(v: CelValue): { value: CelValue | undefined } {
  const c = optionalContent(v);
  if (!c) throw new Error('no such overload: not an optional value');
  return c;
}

function namespace(v: CelValue): void {
  if (v !== OPTIONAL_NAMESPACE) throw new Error('no such overload');
}

type Comparable = bigint | number | string | boolean;
function comparable(list: CelList): Comparable[] {
  return [...list].map((v) => {
    if (
      typeof v === 'bigint' ||
      typeof v === 'number' ||
      typeof v === 'string' ||
      typeof v === 'boolean'
    ) {
      return v;
    }
    if (typeof v === 'object' && v !== null && 'value' in v && typeof v.value === 'bigint')
      return v.value;
    throw new Error('no such overload: list elements are not comparable');
  });
}

function extreme(
  list: CelList,
  name: string,
  pick: (a: Comparable, b: Comparable) => boolean,
): CelValue {
  const values = comparable(list);
  if (values.length === 0) throw new Error(`${name} called on empty list`);
  let best = 0;
  values.forEach((v, i) => {
    if (pick(v, values[best] as Comparable)) best = i;
  });
  return list.get(best) ?? null;
}

function regex(pattern: string): RegExp {
  const re = compilePattern(pattern);
  if (re instanceof Error) throw new Error(`invalid regex: ${re.message}`);
  return new RegExp(re.source, `${re.flags.replace('g', '')}g`);
}

const k8sFuncs = [
  celFunc('_==_', [DYN, DYN], BOOL, (a, b) => celEquals(a, b)),
  celFunc('_!=_', [DYN, DYN], BOOL, (a, b) => !celEquals(a, b)),
  celMethod('hasValue', DYN, [], BOOL, function () {
    return content(this).value !== undefined;
  }),
  celMethod('value', DYN, [], DYN, function () {
    const v = content(this).value;
    if (v === undefined) throw new Error('optional.none() dereference');
    return v;
  }),
  celMethod('orValue', DYN, [DYN], DYN, function (fallback) {
    return content(this).value ?? fallback;
  }),
  celMethod('none', DYN, [], DYN, function () {
    namespace(this);
    return celOptional(undefined);
  }),
  celMethod('of', DYN, [DYN], DYN, function (v) {
    namespace(this);
    return celOptional(v);
  }),
  celMethod('isSorted', LIST, [], BOOL, function () {
    const values = comparable(this);
    return values.every((v, i) => {
      const prev = values[i - 1];
      return prev === undefined || prev <= v;
    });
  }),
  celMethod('sum', LIST, [], DYN, function () {
    const values = comparable(this);
    const ints = values.filter((v) => typeof v === 'bigint');
    if (ints.length === values.length) return ints.reduce((a, b) => a + b, 0n);
    return values.reduce<number>((a, b) => a + Number(b), 0);
  }),
  celMethod('min', LIST, [], DYN, function () {
    return extreme(this, 'min', (a, b) => a < b);
  }),
  celMethod('max', LIST, [], DYN, function () {
    return extreme(this, 'max', (a, b) => a > b);
  }),
  celMethod('indexOf', LIST, [DYN], INT, function (x) {
    return BigInt([...this].findIndex((v) => celEquals(v, x)));
  }),
  celMethod('lastIndexOf', LIST, [DYN], INT, function (x) {
    const values = [...this];
    for (let i = values.length - 1; i >= 0; i--) {
      if (celEquals(values[i] ?? null, x)) return BigInt(i);
    }
    return -1n;
  }),
  celMethod('find', STRING, [STRING], STRING, function (pattern) {
    return regex(pattern).exec(this)?.[0] ?? '';
  }),
  celMethod('findAll', STRING, [STRING], listType(STRING), function (pattern) {
    return celList([...this.matchAll(regex(pattern))].map((m) => m[0]));
  }),
  celMethod('findAll', STRING, [STRING, INT], listType(STRING), function (pattern, n) {
    const all = [...this.matchAll(regex(pattern))].map((m) => m[0]);
    return celList(n < 0n ? all : all.slice(0, Number(n)));
  }),
];

export const ruleEnv: CelEnv = celEnv({ funcs: [...strings, ...k8sFuncs] });

/** Names the planner handles itself rather than through the function table. */
export const BUILTIN_CALLS = new Set(['_&&_', '_||_', '_?_:_', '_[_]', '@not_strictly_false']);

export function isKnownFunction(name: string): boolean {
  return BUILTIN_CALLS.has(name) || ruleEnv.funcs.find(name) !== undefined;
}

export type Bindings = Record<string, CelValue>;
export type Evaluation = { ok: true; value: CelValue } | { ok: false; message: string };

/**
 * An expression checked once, as cel-go's `env.Compile` then `env.Program` does it when
 * Kubernetes stores a CRD: either a program to run, or the issues that stopped it.
 */
type Compiled = { program: (activation: Bindings) => CelResult } | { issues: string };

const compiled = new Map<string, Compiled>();

function compileExpression(expr: string): Compiled {
  const known = compiled.get(expr);
  if (known) return known;
  let result: Compiled;
  try {
    result = { program: plan(ruleEnv, parse(expr)) };
  } catch (err) {
    result = { issues: err instanceof Error ? err.message : String(err) };
  }
  compiled.set(expr, result);
  return result;
}

/**
 * `prg.Eval(activation)`: the activation is the rule's variables plus the `optional`
 * namespace; an evaluation error (or an error value) is reported as its message.
 */
export function evaluate(expr: string, variables: Bindings): Evaluation {
  const c = compileExpression(expr);
  if ('issues' in c) return { ok: false, message: c.issues };
  let value: CelResult;
  try {
    value = c.program({ ...variables, optional: OPTIONAL_NAMESPACE });
  } catch (err) {
    return { ok: false, message: err instanceof Error ? err.message : String(err) };
  }
  if (isCelError(value)) return { ok: false, message: value.message };
  return { ok: true, value };
}
