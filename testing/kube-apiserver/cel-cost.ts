// Worst-case cost of one CEL expression, estimated statically the way a real API
// server does before it accepts a rule (cel-go checker/cost.go with the function
// costs of k8s.io/apiserver/pkg/cel/library/cost.go, and has() free as the
// Kubernetes environment configures it). Rules are parsed with @bufbuild/cel, whose
// AST has the macros expanded exactly as cel-go expands them; types are inferred
// from the schema just far enough to pick the cost of each call.
//
// The model, in short: every identifier and field selection costs 1, constants 0;
// a call costs 1 plus its arguments unless it walks a string or a list; a string
// walk costs 0.1 per character of the largest string the schema allows; a
// comprehension (all, exists, map, filter, exists_one) costs its range's size times
// the cost of one step. Sizes come from the schema (`Decl.maxElements`).
import { parse } from '@bufbuild/cel';
import type { Decl } from './cel-decl.ts';

type Expr = ReturnType<typeof parse>['expr'];
type Call = Extract<Expr['exprKind'], { case: 'callExpr' }>['value'];
type Comprehension = Extract<Expr['exprKind'], { case: 'comprehensionExpr' }>['value'];
type CreateStruct = Extract<Expr['exprKind'], { case: 'structExpr' }>['value'];

/** A cost or size range. */
export interface Range {
  min: number;
  max: number;
}

/** Stands for Go's math.MaxUint64: every sum and product saturates there. */
export const UNBOUNDED = 2 ** 64;

const STRING_TRAVERSAL_COST_FACTOR = 0.1;
const REGEX_STRING_LENGTH_COST_FACTOR = 0.25;
const LIST_CREATE_BASE_COST = 10;
const MAP_CREATE_BASE_COST = 30;
const STRUCT_CREATE_BASE_COST = 40;

const sat = (x: number): number => (x >= UNBOUNDED ? UNBOUNDED : x);
const fixed = (x: number): Range => ({ min: x, max: x });
const ZERO = fixed(0);
const UNKNOWN_SIZE: Range = { min: 0, max: UNBOUNDED };
const add = (a: Range, b: Range): Range => ({ min: sat(a.min + b.min), max: sat(a.max + b.max) });
const mul = (a: Range, b: Range): Range => ({ min: sat(a.min * b.min), max: sat(a.max * b.max) });
const factor = (a: Range, f: number): Range => ({
  min: sat(Math.ceil(a.min * f)),
  max: sat(Math.ceil(a.max * f)),
});
const union = (a: Range, b: Range): Range => ({
  min: Math.min(a.min, b.min),
  max: Math.max(a.max, b.max),
});

type Kind =
  | 'object'
  | 'list'
  | 'map'
  | 'string'
  | 'bytes'
  | 'int'
  | 'uint'
  | 'double'
  | 'bool'
  | 'duration'
  | 'timestamp'
  | 'null'
  | 'type'
  | 'dyn';

/** The inferred CEL type of a node. */
interface CelType {
  kind: Kind;
  decl?: Decl;
  elem?: CelType;
  key?: CelType;
}

const T = (kind: Kind): CelType => ({ kind });
const DYN = T('dyn');
const SCALARS = new Set<Kind>(['bool', 'double', 'duration', 'int', 'timestamp', 'uint']);

function typeOfDecl(d: Decl | undefined): CelType {
  if (!d) return DYN;
  switch (d.kind) {
    case 'object':
      return { kind: 'object', decl: d };
    case 'list':
      return { kind: 'list', elem: typeOfDecl(d.elem) };
    case 'map':
      return { kind: 'map', key: T('string'), elem: typeOfDecl(d.elem) };
    default:
      return T(d.kind);
  }
}

const BOOL_FUNCTIONS = new Set([
  '_&&_',
  '_||_',
  '!_',
  '_==_',
  '_!=_',
  '_<_',
  '_<=_',
  '_>_',
  '_>=_',
  '@in',
  '@not_strictly_false',
  'startsWith',
  'endsWith',
  'matches',
  'contains',
  'isSorted',
  'isURL',
  'isIP',
  'isCIDR',
  'isQuantity',
  'bool',
]);
const INT_FUNCTIONS = new Set([
  'size',
  'indexOf',
  'lastIndexOf',
  'int',
  'getDate',
  'getDayOfMonth',
  'getDayOfWeek',
  'getDayOfYear',
  'getFullYear',
  'getHours',
  'getMilliseconds',
  'getMinutes',
  'getMonth',
  'getSeconds',
]);
const STRING_FUNCTIONS = new Set([
  'lowerAscii',
  'upperAscii',
  'trim',
  'substring',
  'replace',
  'charAt',
  'join',
  'format',
  'quote',
  'string',
  'find',
  'reverse',
  'getScheme',
  'getHost',
  'getHostname',
  'getPort',
  'getEscapedPath',
]);
const OTHER_RESULTS: Record<string, CelType> = {
  duration: T('duration'),
  timestamp: T('timestamp'),
  double: T('double'),
  uint: T('uint'),
  bytes: T('bytes'),
  type: T('type'),
  split: { kind: 'list', elem: T('string') },
  findAll: { kind: 'list', elem: T('string') },
};

function arithmeticType(fn: string, types: CelType[]): CelType {
  const times = types.filter((t) => t.kind === 'timestamp').length;
  if (times === 2 && fn === '_-_') return T('duration');
  if (times > 0) return T('timestamp');
  return types[0] ?? DYN;
}

const ARITHMETIC = new Set(['_+_', '_-_', '_*_', '_/_', '_%_', '-_']);

/** The result type of a call, as far as the cost model needs it. */
function callResultType(fn: string, target: CelType | undefined, args: CelType[]): CelType {
  if (BOOL_FUNCTIONS.has(fn)) return T('bool');
  if (INT_FUNCTIONS.has(fn)) return T('int');
  if (STRING_FUNCTIONS.has(fn)) return T('string');
  if (ARITHMETIC.has(fn)) return arithmeticType(fn, args);
  const other = OTHER_RESULTS[fn];
  if (other) return other;
  if (fn === '_?_:_') return args[1]?.kind === 'dyn' ? (args[2] ?? DYN) : (args[1] ?? DYN);
  if (fn === '_[_]') return args[0]?.elem ?? DYN;
  if (fn === 'sum' || fn === 'min' || fn === 'max') return target?.elem ?? DYN;
  return DYN;
}

interface EntrySize {
  container: 'list' | 'map';
  key: Range;
  val: Range;
}

interface LocalVar {
  path: string[];
  type: CelType;
  size?: Range | undefined;
  entrySize?: EntrySize | undefined;
}

interface CallEstimate {
  cost: Range;
  resultSize?: Range | undefined;
}

/** One call being priced: the call node, its target and arguments, and their costs. */
interface CallSite {
  e: Expr;
  fn: string;
  target: Expr | undefined;
  args: Expr[];
  argCosts: Range[];
  argSum: Range;
}

type CostFn = (call: CallSite) => CallEstimate | undefined;

/** Estimates one expression against the declaration of the schema node it is attached to. */
class Coster {
  private readonly types = new Map<Expr, CelType>();
  private readonly paths = new Map<Expr, string[]>();
  private readonly sizes = new Map<Expr, Range>();
  private readonly entrySizes = new Map<Expr, EntrySize>();
  private readonly locals = new Map<string, LocalVar[]>();
  private readonly root: Decl;
  private readonly rootType: CelType;

  constructor(root: Decl) {
    this.root = root;
    this.rootType = typeOfDecl(root);
  }

  cost(e: Expr): Range {
    const k = e.exprKind;
    switch (k.case) {
      case 'constExpr':
        this.types.set(e, this.constType(k.value.constantKind.case));
        return ZERO;
      case 'identExpr':
        return this.costIdent(e, k.value.name);
      case 'selectExpr':
        return this.costSelect(e, k.value.operand, k.value.field, k.value.testOnly);
      case 'callExpr':
        return this.costCall(e, k.value);
      case 'listExpr':
        return this.costCreateList(e, k.value.elements);
      case 'structExpr':
        return this.costCreateStruct(e, k.value);
      case 'comprehensionExpr':
        return this.isBind(k.value)
          ? this.costBind(e, k.value)
          : this.costComprehension(e, k.value);
      default:
        return ZERO;
    }
  }

  private constType(c: string | undefined): CelType {
    const byCase: Record<string, Kind> = {
      nullValue: 'null',
      boolValue: 'bool',
      int64Value: 'int',
      uint64Value: 'uint',
      doubleValue: 'double',
      stringValue: 'string',
      bytesValue: 'bytes',
      durationValue: 'duration',
      timestampValue: 'timestamp',
    };
    return T(byCase[c ?? ''] ?? 'dyn');
  }

  private typeOf(e: Expr | undefined): CelType {
    return (e && this.types.get(e)) ?? DYN;
  }

  private peek(name: string): LocalVar | undefined {
    const stack = this.locals.get(name);
    return stack?.[stack.length - 1];
  }

  private push(name: string, v: LocalVar): void {
    this.locals.set(name, [...(this.locals.get(name) ?? []), v]);
  }

  private pop(name: string): void {
    this.locals.get(name)?.pop();
  }

  private getPath(e: Expr): string[] {
    if (e.exprKind.case === 'identExpr') {
      const v = this.peek(e.exprKind.value.name);
      if (v) return v.path;
    }
    return this.paths.get(e) ?? [];
  }

  private costIdent(e: Expr, name: string): Range {
    const v = this.peek(name);
    if (v) {
      this.paths.set(e, v.path);
      this.types.set(e, v.type);
    } else {
      this.paths.set(e, [name]);
      this.types.set(e, name === 'self' || name === 'oldSelf' ? this.rootType : DYN);
    }
    return fixed(1);
  }

  private costSelect(e: Expr, operand: Expr | undefined, field: string, testOnly: boolean): Range {
    if (!operand) return ZERO;
    const operandCost = this.cost(operand);
    if (testOnly) {
      // has(): the Kubernetes environment makes the presence test itself free.
      this.types.set(e, T('bool'));
      return operandCost;
    }
    const t = this.typeOf(operand);
    this.paths.set(e, [...this.getPath(operand), field]);
    if (t.kind === 'object') this.types.set(e, typeOfDecl(t.decl?.fields?.get(field)));
    else this.types.set(e, t.kind === 'map' ? (t.elem ?? DYN) : DYN);
    return t.kind === 'object' || t.kind === 'map' ? add(operandCost, fixed(1)) : operandCost;
  }

  private costCall(e: Expr, call: Call): Range {
    const fn = call.function;
    if (fn === 'dyn' && call.args.length === 1 && call.args[0]) {
      const arg = call.args[0];
      const argCost = this.cost(arg);
      this.types.set(e, DYN);
      this.copySizes(e, arg);
      return add(fixed(1), argCost);
    }
    const argCosts = call.args.map((a) => this.cost(a));
    const target = call.target;
    let sum = ZERO;
    if (target) sum = this.cost(target);
    this.types.set(
      e,
      callResultType(
        fn,
        target && this.typeOf(target),
        call.args.map((a) => this.typeOf(a)),
      ),
    );
    const argSum = argCosts.reduce(add, ZERO);
    const estimate = this.functionCost({ e, fn, target, args: call.args, argCosts, argSum });
    let resultSize = estimate.resultSize;
    if (fn === '_[_]' && call.args[0]) {
      const container = call.args[0];
      const list = this.typeOf(container).kind === 'list';
      resultSize = this.entrySize(container)?.val;
      this.paths.set(e, [...this.getPath(container), list ? '@items' : '@values']);
    }
    resultSize ??= this.computeSize(e);
    if (resultSize) this.sizes.set(e, resultSize);
    return add(sum, estimate.cost);
  }

  private functionCost(call: CallSite): CallEstimate {
    const k8s = this.libraryCosts[call.fn]?.(call);
    if (k8s) return { cost: add(k8s.cost, call.argSum), resultSize: k8s.resultSize };
    return this.builtinCosts[call.fn]?.(call) ?? { cost: add(fixed(1), call.argSum) };
  }

  /** The functions Kubernetes' CEL libraries price themselves (library/cost.go). */
  private readonly libraryCosts: Record<string, CostFn> = {
    ...Object.fromEntries(
      ['isSorted', 'sum', 'max', 'min', 'indexOf', 'lastIndexOf'].map((fn) => [
        fn,
        ({ target }: CallSite) => (target ? this.listTraversalCost(target) : undefined),
      ]),
    ),
    ...Object.fromEntries(
      ['lowerAscii', 'upperAscii', 'substring', 'trim'].map((fn) => [
        fn,
        ({ target }: CallSite) =>
          target ? { ...this.traversal(target, 1), resultSize: this.size(target) } : undefined,
      ]),
    ),
    ...Object.fromEntries(
      [
        'sign',
        'asInteger',
        'isInteger',
        'asApproximateFloat',
        'isGreaterThan',
        'isLessThan',
        'compareTo',
        'add',
        'sub',
      ].map((fn) => [fn, () => ({ cost: fixed(1) })]),
    ),
    url: ({ args: [a0, ...rest] }) => (a0 && rest.length === 0 ? this.traversal(a0, 1) : undefined),
    replace: ({ target, args: [from, to] }) =>
      target && from && to ? this.replaceCost(target, from, to) : undefined,
    // Worst case: every character becomes an element.
    split: ({ target }) =>
      target
        ? { ...this.traversal(target, 2), resultSize: { min: 0, max: this.size(target).max } }
        : undefined,
    join: ({ target, args: [separator] }) =>
      target ? this.joinCost(target, separator) : undefined,
    find: ({ target, args: [regex] }) =>
      target && regex ? this.findCost(target, regex) : undefined,
    findAll: ({ target, args: [regex] }) =>
      target && regex ? this.findCost(target, regex) : undefined,
  };

  private traversal(e: Expr, passes: number): CallEstimate {
    return { cost: factor(this.size(e), passes * STRING_TRAVERSAL_COST_FACTOR) };
  }

  private replaceCost(target: Expr, from: Expr, to: Expr): CallEstimate {
    const size = this.size(target).max;
    const fromMin = this.size(from).min;
    const toMax = this.size(to).max;
    // The longest result: the smallest match replaced by the longest text, everywhere.
    let max: number;
    if (fromMin === 0) max = sat((size + 1) * toMax + size);
    else if (toMax <= fromMin) max = size;
    else max = sat(Math.ceil(size / fromMin) * toMax);
    return { ...this.traversal(target, 2), resultSize: { min: 0, max } };
  }

  private listTraversalCost(target: Expr): CallEstimate {
    const t = this.typeOf(target);
    if (t.kind !== 'list') return this.traversal(target, 1);
    let elementCost = fixed(1);
    if (t.elem?.kind === 'string' || t.elem?.kind === 'bytes') {
      const elementSize = this.sizeAt([...this.getPath(target), '@items']) ?? UNKNOWN_SIZE;
      elementCost = add(elementCost, factor(elementSize, STRING_TRAVERSAL_COST_FACTOR));
    }
    return { cost: mul(this.size(target), elementCost) };
  }

  private joinCost(target: Expr, separator: Expr | undefined): CallEstimate {
    const listSize = this.size(target);
    const elementSize = this.sizeAt([...this.getPath(target), '@items']) ?? UNKNOWN_SIZE;
    let size = mul(listSize, elementSize);
    if (separator) {
      const separators = { min: Math.max(listSize.min - 1, 0), max: Math.max(listSize.max - 1, 0) };
      size = add(size, mul(this.size(separator), separators));
    }
    return { cost: factor(size, STRING_TRAVERSAL_COST_FACTOR), resultSize: size };
  }

  private findCost(target: Expr, regex: Expr): CallEstimate {
    const size = this.size(target);
    const strCost = factor(add(size, fixed(1)), STRING_TRAVERSAL_COST_FACTOR);
    const regexCost = factor(this.size(regex), REGEX_STRING_LENGTH_COST_FACTOR);
    return { cost: mul(strCost, regexCost), resultSize: { min: 0, max: size.max } };
  }

  private isText(x: Expr | undefined): boolean {
    const kind = x && this.typeOf(x).kind;
    return kind === 'string' || kind === 'bytes';
  }

  /** cel-go's own function costs (checker/cost.go functionCost); anything else costs 1. */
  private readonly builtinCosts: Record<string, CostFn> = {
    // Short-circuit: at least the left side, at most both.
    '_&&_': ({ argCosts: [lhs = ZERO, rhs = ZERO] }) => ({
      cost: { min: lhs.min, max: sat(lhs.max + rhs.max) },
    }),
    '_||_': ({ argCosts: [lhs = ZERO, rhs = ZERO] }) => ({
      cost: { min: lhs.min, max: sat(lhs.max + rhs.max) },
    }),
    '_?_:_': (c) => this.conditionalCost(c.e, c.args, c.argCosts),
    '@in': ({ args: [, list], argSum }) =>
      list && ['list', 'dyn'].includes(this.typeOf(list).kind)
        ? { cost: add(this.size(list), argSum) }
        : undefined,
    startsWith: (c) => this.affixCost(c),
    endsWith: (c) => this.affixCost(c),
    matches: ({ target, args, argSum }) =>
      target && args[0] && args.length === 1
        ? { cost: add(this.matchesCost(target, args[0]), argSum) }
        : undefined,
    contains: ({ target, args: [sub], argSum }) =>
      target && sub && this.isText(target)
        ? {
            cost: add(
              mul(
                factor(this.size(target), STRING_TRAVERSAL_COST_FACTOR),
                factor(this.size(sub), STRING_TRAVERSAL_COST_FACTOR),
              ),
              argSum,
            ),
          }
        : undefined,
    '_+_': ({ e, args: [lhs, rhs], argSum }) =>
      lhs && rhs ? this.concatCost(e, lhs, rhs, argSum) : undefined,
    '_==_': (c) => this.comparisonCost(c),
    '_!=_': (c) => this.comparisonCost(c),
    // Strings and bytes compare like equality; numbers and times in O(1).
    '_<_': (c) => (this.isText(c.args[0]) ? this.comparisonCost(c) : undefined),
    '_<=_': (c) => (this.isText(c.args[0]) ? this.comparisonCost(c) : undefined),
    '_>_': (c) => (this.isText(c.args[0]) ? this.comparisonCost(c) : undefined),
    '_>=_': (c) => (this.isText(c.args[0]) ? this.comparisonCost(c) : undefined),
    bytes: (c) => this.conversionCost(c),
    string: (c) => this.conversionCost(c),
  };

  private affixCost({ target, args, argSum }: CallSite): CallEstimate | undefined {
    if (!target || !args[0] || args.length !== 1) return undefined;
    return { cost: add(factor(this.size(args[0]), STRING_TRAVERSAL_COST_FACTOR), argSum) };
  }

  /** string(bytes) and bytes(string) walk their argument. */
  private conversionCost({ fn, args, argSum }: CallSite): CallEstimate | undefined {
    const [a0] = args;
    if (!a0 || args.length !== 1 || !this.isText(a0) || this.typeOf(a0).kind === fn)
      return undefined;
    const size = this.size(a0);
    const resultSize =
      fn === 'bytes'
        ? { min: size.min, max: sat(size.max * 4) }
        : { min: Math.floor(size.min / 4), max: size.max };
    return { cost: add(factor(size, STRING_TRAVERSAL_COST_FACTOR), argSum), resultSize };
  }

  private conditionalCost(e: Expr, args: Expr[], argCosts: Range[]): CallEstimate {
    const [, t, f] = args;
    const [cond = ZERO, ifTrue = ZERO, ifFalse = ZERO] = argCosts;
    const size = union(this.size(t), this.size(f));
    const a = t && this.entrySize(t);
    const b = f && this.entrySize(f);
    if (a && b)
      this.entrySizes.set(e, { ...a, key: union(a.key, b.key), val: union(a.val, b.val) });
    return { cost: add(cond, union(ifTrue, ifFalse)), resultSize: size };
  }

  private matchesCost(target: Expr, regex: Expr): Range {
    // The string walk, times the regex length / 4 (a guess at its number of states).
    const strCost = factor(add(this.size(target), fixed(1)), STRING_TRAVERSAL_COST_FACTOR);
    return mul(strCost, factor(this.size(regex), REGEX_STRING_LENGTH_COST_FACTOR));
  }

  private concatCost(e: Expr, lhs: Expr, rhs: Expr, argSum: Range): CallEstimate | undefined {
    const kind = this.typeOf(lhs).kind;
    if (kind !== 'string' && kind !== 'bytes' && kind !== 'list') return undefined;
    const resultSize = add(this.size(lhs), this.size(rhs));
    const a = this.entrySize(lhs);
    const b = this.entrySize(rhs);
    if (a && b)
      this.entrySizes.set(e, { ...a, key: union(a.key, b.key), val: union(a.val, b.val) });
    // List concatenation is O(1); string and bytes concatenation copies both sides.
    if (kind === 'list') return { cost: add(fixed(1), argSum), resultSize };
    return { cost: add(factor(resultSize, STRING_TRAVERSAL_COST_FACTOR), argSum), resultSize };
  }

  /** Equality (any type) and string ordering: a walk of the shorter side. */
  private comparisonCost({ args: [lhs, rhs], argSum }: CallSite): CallEstimate {
    const smallestMax = Math.min(this.size(lhs).max, this.size(rhs).max);
    const walk = { min: smallestMax > 0 ? 1 : 0, max: smallestMax };
    return { cost: add(factor(walk, STRING_TRAVERSAL_COST_FACTOR), argSum) };
  }

  private costCreateList(e: Expr, elements: Expr[]): Range {
    let sum = fixed(LIST_CREATE_BASE_COST);
    let itemSize: Range = { min: elements.length === 0 ? 0 : UNBOUNDED, max: 0 };
    for (const el of elements) {
      sum = add(sum, this.cost(el));
      itemSize = union(itemSize, this.size(el));
    }
    this.entrySizes.set(e, { container: 'list', key: fixed(1), val: itemSize });
    this.types.set(e, { kind: 'list', elem: elements[0] ? this.typeOf(elements[0]) : DYN });
    return sum;
  }

  private costCreateStruct(e: Expr, s: CreateStruct): Range {
    if (s.messageName !== '') {
      this.types.set(e, T('object'));
      return s.entries.reduce(
        (sum, en) => add(sum, en.value ? this.cost(en.value) : ZERO),
        fixed(STRUCT_CREATE_BASE_COST),
      );
    }
    let sum = fixed(MAP_CREATE_BASE_COST);
    const empty = s.entries.length === 0;
    let keySize: Range = { min: empty ? 0 : UNBOUNDED, max: 0 };
    let valSize: Range = { ...keySize };
    for (const en of s.entries) {
      const key = en.keyKind.case === 'mapKey' ? en.keyKind.value : undefined;
      if (key) {
        sum = add(sum, this.cost(key));
        keySize = union(keySize, this.size(key));
      }
      if (en.value) {
        sum = add(sum, this.cost(en.value));
        valSize = union(valSize, this.size(en.value));
      }
    }
    this.entrySizes.set(e, { container: 'map', key: keySize, val: valSize });
    const first = s.entries[0];
    const firstKey = first?.keyKind.case === 'mapKey' ? first.keyKind.value : undefined;
    this.types.set(e, { kind: 'map', key: this.typeOf(firstKey), elem: this.typeOf(first?.value) });
    return sum;
  }

  private isBind(c: Comprehension): boolean {
    const range = c.iterRange?.exprKind;
    const cond = c.loopCondition?.exprKind;
    return (
      range?.case === 'listExpr' &&
      range.value.elements.length === 0 &&
      cond?.case === 'constExpr' &&
      cond.value.constantKind.case === 'boolValue' &&
      !cond.value.constantKind.value &&
      c.accuVar !== '@result' &&
      c.accuVar !== '__result__'
    );
  }

  private costBind(e: Expr, c: Comprehension): Range {
    let sum = add(this.costOf(c.iterRange), this.costOf(c.accuInit));
    this.pushLocal(c.accuVar, c.accuInit);
    sum = add(sum, this.costOf(c.result));
    this.pop(c.accuVar);
    this.types.set(e, this.typeOf(c.result));
    if (c.result) this.copySizes(e, c.result);
    return sum;
  }

  private costComprehension(e: Expr, c: Comprehension): Range {
    const range = c.iterRange;
    let sum = add(this.costOf(range), this.costOf(c.accuInit));
    this.pushLocal(c.accuVar, c.accuInit);
    if (range) this.pushIterVars(c, range);
    const loopCost = this.costOf(c.loopCondition);
    const stepCost = this.costOf(c.loopStep);
    this.pop(c.iterVar);
    if (c.iterVar2) this.pop(c.iterVar2);
    sum = add(sum, this.costOf(c.result));
    this.pop(c.accuVar);
    const rangeCount = this.size(range);
    sum = add(sum, mul(rangeCount, add(stepCost, loopCost)));
    const init = c.accuInit?.exprKind.case;
    const container = init === 'listExpr' || init === 'structExpr';
    this.types.set(e, container ? this.typeOf(c.loopStep) : this.typeOf(c.result));
    if (init === 'constExpr' && c.accuInit) {
      const size = this.computeSize(c.accuInit);
      if (size) this.sizes.set(e, size);
    } else if (container) {
      this.sizes.set(e, rangeCount);
      const step = c.loopStep && this.entrySize(c.loopStep);
      if (step) this.entrySizes.set(e, step);
    }
    return sum;
  }

  private pushIterVars(c: Comprehension, range: Expr): void {
    const entry = this.entrySize(range);
    const t = this.typeOf(range);
    const list = (entry?.container ?? (t.kind === 'list' ? 'list' : 'map')) === 'list';
    const path = this.getPath(range);
    const keyType = list ? T('int') : (t.key ?? DYN);
    const valueType = t.elem ?? DYN;
    if (c.iterVar2) {
      const keys = list ? '@indices' : '@keys';
      this.push(c.iterVar, { path: [...path, keys], type: keyType, size: entry?.key });
      const values = list ? '@items' : '@values';
      this.push(c.iterVar2, { path: [...path, values], type: valueType, size: entry?.val });
      return;
    }
    this.push(c.iterVar, {
      path: [...path, list ? '@items' : '@keys'],
      type: list ? valueType : keyType,
      size: list ? entry?.val : entry?.key,
    });
  }

  private pushLocal(name: string, init: Expr | undefined): void {
    this.push(name, {
      path: init ? this.getPath(init) : [],
      type: this.typeOf(init),
      size: init && this.computeSize(init),
      entrySize: init && this.entrySize(init),
    });
  }

  private costOf(e: Expr | undefined): Range {
    return e ? this.cost(e) : ZERO;
  }

  private copySizes(dst: Expr, src: Expr): void {
    const size = this.computeSize(src);
    if (size) this.sizes.set(dst, size);
    const entry = this.entrySize(src);
    if (entry) this.entrySizes.set(dst, entry);
  }

  private entrySize(e: Expr): EntrySize | undefined {
    const known = this.entrySizes.get(e);
    if (known) return known;
    if (e.exprKind.case === 'identExpr') return this.peek(e.exprKind.value.name)?.entrySize;
    return undefined;
  }

  private size(e: Expr | undefined): Range {
    return (e && this.computeSize(e)) ?? UNKNOWN_SIZE;
  }

  /** Computed sizes first, then literals, then the schema, then scalar types, then locals. */
  private computeSize(e: Expr): Range | undefined {
    const known = this.sizes.get(e) ?? literalSize(e) ?? this.sizeAt(this.getPath(e));
    if (known) return known;
    if (SCALARS.has(this.typeOf(e).kind)) return fixed(1);
    if (e.exprKind.case === 'identExpr') return this.peek(e.exprKind.value.name)?.size;
    return undefined;
  }

  /** The schema's size bound at a path (its first element, the variable, is the rule's node). */
  private sizeAt(path: string[]): Range | undefined {
    if (path.length === 0) return undefined;
    let node: Decl | undefined = this.root;
    for (const step of path.slice(1)) {
      if (step === '@items' || step === '@values') node = node.elem;
      else if (step === '@keys') node = node.key;
      else node = node.fields?.get(step);
      if (!node) return undefined;
    }
    return { min: 0, max: node.maxElements };
  }
}

function literalSize(e: Expr): Range | undefined {
  const k = e.exprKind;
  switch (k.case) {
    case 'constExpr': {
      const c = k.value.constantKind;
      if (c.case === 'stringValue') return fixed([...c.value].length);
      if (c.case === 'bytesValue') return fixed(c.value.length);
      return c.case === undefined ? undefined : fixed(1);
    }
    case 'listExpr':
      return fixed(k.value.elements.length);
    case 'structExpr':
      return k.value.messageName === '' ? fixed(k.value.entries.length) : undefined;
    default:
      return undefined;
  }
}

/**
 * The estimated worst-case cost of a CEL expression attached to a schema node whose
 * CEL declaration is `self` (also the type of `oldSelf`). Throws when it does not parse.
 */
export function estimateExpressionCost(expression: string, self: Decl): Range {
  return new Coster(self).cost(parse(expression).expr);
}
