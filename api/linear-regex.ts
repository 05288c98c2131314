// JSONata's regular expressions (`/…/` in an expression, or in a string given to
// $eval) run on V8's linear-time engine: a pattern such as /(a+)+$/ on a short string
// of the caller's would otherwise backtrack for minutes inside one synchronous call,
// where JSONata's time limit is never checked, and hold the whole process (every
// namespace's executions and webhooks) meanwhile. The engine is V8's own (the `l` flag,
// behind --enable-experimental-regexp-engine, set here when this module loads). It has
// no case-insensitive mode: an /i pattern is rewritten to list each letter's cases
// (`a` → `[aA]`, `[a-c]` → `[a-cA-C]`), with the case mapping of JavaScript's own /i.
// It refuses what it cannot run in linear time: backreferences, lookahead, a counted
// repetition over 16 (`a{1,17}`). Admission (workflow-check.ts) and the engine's compile
// (runtime/engine/expressions.ts) report such a pattern as an invalid expression.
import { setFlagsFromString } from 'node:v8';
import { treeObjects } from './jsonata-tree.ts';

setFlagsFromString('--enable-experimental-regexp-engine');

/** JavaScript's /i mapping without the u flag (ECMA-262 Canonicalize). */
function canonical(unit: number): number {
  const upper = String.fromCharCode(unit).toUpperCase();
  if (upper.length !== 1) return unit;
  const code = upper.charCodeAt(0);
  return unit >= 128 && code < 128 ? unit : code;
}

/** Code unit → the other code units /i takes for the same character (none for most). */
let otherCases: Map<number, number[]> | undefined;

function casesOf(unit: number): number[] {
  if (!otherCases) {
    const groups = new Map<number, number[]>();
    for (let u = 0; u <= 0xffff; u++) {
      const key = canonical(u);
      const group = groups.get(key);
      if (group) group.push(u);
      else groups.set(key, [u]);
    }
    otherCases = new Map();
    for (const group of groups.values()) {
      if (group.length < 2) continue;
      for (const u of group) otherCases.set(u, group);
    }
  }
  return otherCases.get(unit) ?? [];
}

const hex4 = (unit: number): string => `\\u${unit.toString(16).padStart(4, '0')}`;

/** Code units as class members, runs of them as ranges. */
function classMembers(units: Iterable<number>): string {
  const sorted = [...new Set(units)].sort((a, b) => a - b);
  let text = '';
  for (let i = 0; i < sorted.length;) {
    let j = i;
    while (j + 1 < sorted.length && (sorted[j + 1] as number) === (sorted[j] as number) + 1) j++;
    const first = sorted[i] as number;
    const last = sorted[j] as number;
    text += first === last ? hex4(first) : `${hex4(first)}-${hex4(last)}`;
    i = j + 1;
  }
  return text;
}

/**
 * Where an escape is read (Annex B, no u flag): in a character class `\b` is a backspace
 * and a decimal escape is octal; outside, `\1`… up to the pattern's capture groups and
 * `\k` (when a group is named) are backreferences.
 */
interface EscapeContext {
  inClass: boolean;
  groups: number;
  named: boolean;
}

/** The capture groups of `source` (no u flag): their count, and whether one is named. */
function captureGroups(source: string): { groups: number; named: boolean } {
  let groups = 0;
  let named = false;
  let inClass = false;
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === '\\') i++;
    else if (inClass) inClass = c !== ']';
    else if (c === '[') inClass = true;
    else if (c === '(' && source[i + 1] !== '?') groups++;
    else if (c === '(' && source.startsWith('(?<', i) && !/[=!]/.test(source[i + 3] ?? '')) {
      groups++;
      named = true;
    }
  }
  return { groups, named };
}

const CONTROL_ESCAPES: Readonly<Record<string, number>> = { f: 12, n: 10, r: 13, t: 9, v: 11 };

/**
 * The literal code unit an escape at `source[at]` (a backslash) stands for (undefined for
 * a class escape, an assertion or a backreference, the same with or without /i), and its
 * length. Annex B's identity escapes (`\N` is N, `\k` without a named group is k) and
 * legacy octal escapes (`\101` is A) are letters too: /i matches their other cases.
 */
function escapedUnit(source: string, at: number, context: EscapeContext): EscapeRead {
  const kind = source[at + 1];
  if (kind === undefined) return { unit: undefined, length: 1 };
  if (kind === 'x' || kind === 'u' || kind === 'c') return codeEscape(source, at, context);
  if (/[0-9]/.test(kind)) return decimalEscape(source, at, context);
  if ('dDwWsS'.includes(kind)) return { unit: undefined, length: 2 };
  if (kind === 'b') return { unit: context.inClass ? 8 : undefined, length: 2 };
  if (kind === 'B' && !context.inClass) return { unit: undefined, length: 2 };
  const control = CONTROL_ESCAPES[kind];
  if (control !== undefined) return { unit: control, length: 2 };
  if (kind === 'k' && context.named && !context.inClass) {
    const close = source.indexOf('>', at);
    return { unit: undefined, length: close < 0 ? 2 : close - at + 1 }; // a backreference
  }
  // An identity escape: the character itself.
  return { unit: kind.charCodeAt(0), length: 2 };
}

type EscapeRead = { unit: number | undefined; length: number };

/** `\xHH`, `\uHHHH` and `\cX`; `\x`, `\u` without their digits are the letters. */
function codeEscape(source: string, at: number, context: EscapeContext): EscapeRead {
  const kind = source[at + 1] as string;
  const hex = (n: number) => source.slice(at + 2, at + 2 + n);
  if (kind === 'x' && /^[0-9a-fA-F]{2}$/.test(hex(2))) {
    return { unit: parseInt(hex(2), 16), length: 4 };
  }
  if (kind === 'u' && /^[0-9a-fA-F]{4}$/.test(hex(4))) {
    return { unit: parseInt(hex(4), 16), length: 6 };
  }
  if (kind !== 'c') return { unit: kind.charCodeAt(0), length: 2 };
  const letter = source[at + 2] ?? '';
  if (/^[a-zA-Z]$/.test(letter) || (context.inClass && /^[0-9_]$/.test(letter)))
    return { unit: letter.charCodeAt(0) % 32, length: 3 };
  // A backslash and a c, read as they are.
  return { unit: undefined, length: 2 };
}

/** `\1`…: a backreference (outside a class, up to the groups), else octal, else `\8`, `\9`. */
function decimalEscape(source: string, at: number, context: EscapeContext): EscapeRead {
  const digits = /^[0-9]+/.exec(source.slice(at + 1))?.[0] ?? '';
  if (!context.inClass && !digits.startsWith('0') && Number(digits) <= context.groups)
    return { unit: undefined, length: 1 + digits.length };
  const octal = /^(?:[0-3][0-7][0-7]|[0-7][0-7]?)/.exec(digits)?.[0];
  if (octal === undefined) return { unit: digits.charCodeAt(0), length: 2 };
  return { unit: parseInt(octal, 8), length: 1 + octal.length };
}

/** A character class from `source[at]` ('['): its text with the other cases added. */
function caselessClass(
  source: string,
  at: number,
  groups: { groups: number; named: boolean },
): { text: string; end: number } {
  const context: EscapeContext = { ...groups, inClass: true };
  let i = at + 1;
  if (source[i] === '^') i++;
  const extra: number[] = [];
  let previous: number | undefined;
  let lastIsDash = false;
  while (i < source.length && source[i] !== ']') {
    let unit: number | undefined;
    let length = 1;
    if (source[i] === '\\') ({ unit, length } = escapedUnit(source, i, context));
    else unit = source.charCodeAt(i);
    lastIsDash = source[i] === '-';
    // A range `previous-unit`: the other cases of every unit within it.
    if (unit !== undefined && previous !== undefined && source[i - 1] === '-' && i - 2 >= at) {
      for (let u = previous; u <= unit; u++) extra.push(...casesOf(u));
      previous = undefined;
    } else {
      if (unit !== undefined) extra.push(...casesOf(unit));
      previous = source[i + length] === '-' && source[i + length + 1] !== ']' ? unit : undefined;
    }
    i += length;
    if (previous !== undefined) i++; // the '-'
  }
  // A '-' last is a member: it stays last, after the members added.
  const body = source.slice(at, lastIsDash ? i - 1 : i);
  return { text: `${body}${classMembers(extra)}${lastIsDash ? '-' : ''}]`, end: i + 1 };
}

/** `source` (no u flag) rewritten to match, without /i, what it matches with /i. */
export function caseless(source: string): string {
  const groups = captureGroups(source);
  const context: EscapeContext = { ...groups, inClass: false };
  let out = '';
  let i = 0;
  while (i < source.length) {
    const c = source[i] as string;
    if (c === '[') {
      const cls = caselessClass(source, i, groups);
      out += cls.text;
      i = cls.end;
      continue;
    }
    if (c === '(' && source.startsWith('(?<', i) && !/[=!]/.test(source[i + 3] ?? '')) {
      const close = source.indexOf('>', i); // a group name: taken as it is
      const end = close < 0 ? source.length : close + 1;
      out += source.slice(i, end);
      i = end;
      continue;
    }
    let unit: number | undefined;
    let length = 1;
    if (c === '\\') ({ unit, length } = escapedUnit(source, i, context));
    else unit = source.charCodeAt(i);
    const cases = unit === undefined ? [] : casesOf(unit);
    out += cases.length > 0 ? `[${classMembers(cases)}]` : source.slice(i, i + length);
    i += length;
  }
  return out;
}

/** `source` with `flags` on the linear-time engine; throws a SyntaxError when it cannot be. */
function linear(source: string, flags: string): RegExp {
  const caseInsensitive = flags.includes('i');
  const rest = flags.replace(/[il]/g, '');
  return new RegExp(caseInsensitive ? caseless(source) : source, `${rest}l`);
}

/** Rewritten literals, by the parsed literal (JSONata makes one per evaluation of it). */
const rewritten = new WeakMap<RegExp, RegExp>();

/**
 * JSONata's `RegexEngine` option: called as `new RegexEngine(regex)` with the parsed
 * literal; answers the same pattern on the linear-time engine (a constructor that
 * returns an object: `new` hands that object on). A fresh RegExp each time, as
 * JSONata's own `new RegExp(regex)` is: it sets lastIndex on it.
 */
export const LinearRegExp = function LinearRegExp(pattern: RegExp | string, flags?: string) {
  if (typeof pattern === 'string') return linear(pattern, flags ?? '');
  let known = rewritten.get(pattern);
  if (!known) {
    known = linear(pattern.source, flags ?? pattern.flags);
    rewritten.set(pattern, known);
  }
  return new RegExp(known);
} as unknown as RegExpConstructor;

/**
 * The first regular expression literal of a compiled JSONata syntax tree that cannot
 * run in linear time, as a sentence; undefined when there is none.
 */
export function nonLinearRegex(ast: unknown): string | undefined {
  for (const node of treeObjects(ast)) {
    if (!(node instanceof RegExp)) continue;
    try {
      linear(node.source, node.flags);
    } catch {
      return `regular expression /${node.source}/ cannot run in linear time (backreferences, lookahead and counted repetitions over 16 are not supported)`;
    }
  }
  return undefined;
}
