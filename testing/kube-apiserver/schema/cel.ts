// Evaluation of `x-kubernetes-validations` rules (CRD docs, "Validation rules"), node by
// node: `self` is the node's value; `oldSelf` (transition rules) is its correlated old
// value on an UPDATE (same object key, or the same keys in a `map` list) and such a
// rule is skipped where there is none, unless `optionalOldSelf` makes `oldSelf` an
// optional (empty on CREATE). A failing rule reports its `messageExpression` (if it
// yields a non-empty one-line string), else `message`, else `failed rule: <rule>`, at
// the node (plus `fieldPath`), typed by `reason`. Ratcheting: a non-transition rule
// failing on a value that did not change is a warning, not an error.
import { fe, OMIT, errorLine } from './errors.ts';
import { celOptional, toCel } from './cel-values.ts';
import { evaluate, type Bindings } from './cel-env.ts';
import { compileExpression, type Compiled } from './cel-compile.ts';
import {
  deepEqual,
  FieldPath,
  isObject,
  property,
  type FieldError,
  type OpenApiSchema,
  type ValidationRule,
} from './types.ts';

export interface RuleOutcome {
  errors: FieldError[];
  warnings: string[];
}

type Old = { value: unknown } | undefined;

/** Run every rule of `schema` over `value` (a whole object); `old` on UPDATE. */
export function validateRules(value: unknown, schema: OpenApiSchema, old?: Old): RuleOutcome {
  const out: RuleOutcome = { errors: [], warnings: [] };
  walk(value, schema, FieldPath.root, old, false, true, out);
  return out;
}

const compiled = new WeakMap<ValidationRule, Compiled>();

function compile(rule: ValidationRule, s: OpenApiSchema, root: boolean): Compiled {
  let c = compiled.get(rule);
  if (!c) {
    c = compileExpression(rule.rule, { schema: s, typeMeta: root });
    compiled.set(rule, c);
  }
  return c;
}

function walk(
  x: unknown,
  s: OpenApiSchema,
  path: FieldPath,
  old: Old,
  parentUnchanged: boolean,
  root: boolean,
  out: RuleOutcome,
): void {
  if (x === null || x === undefined) return;
  const unchanged = old ? deepEqual(x, old.value) : parentUnchanged;
  runRules(x, s, path, old, unchanged, root, out);
  for (const sub of s.allOf ?? []) walk(x, sub, path, old, unchanged, root, out);
  if (Array.isArray(x) && s.items) {
    const items = s.items;
    x.forEach((item, i) =>
      walk(item, items, path.index(i), mapListItem(item, s, old), unchanged, false, out),
    );
  } else if (isObject(x)) {
    const oldObj = old && isObject(old.value) ? old.value : undefined;
    const oldChild = (k: string): Old =>
      oldObj && Object.hasOwn(oldObj, k) && oldObj[k] !== null ? { value: oldObj[k] } : undefined;
    for (const [k, v] of Object.entries(x)) {
      const prop = property(s, k);
      if (prop) walk(v, prop, path.child(k), oldChild(k), unchanged, false, out);
      else if (isObject(s.additionalProperties)) {
        walk(v, s.additionalProperties, path.key(k), oldChild(k), unchanged, false, out);
      }
    }
  }
}

/** Only items of `map` lists correlate (by their keys); other list items have no old value. */
function mapListItem(item: unknown, s: OpenApiSchema, old: Old): Old {
  if (
    !old ||
    !Array.isArray(old.value) ||
    s['x-kubernetes-list-type'] !== 'map' ||
    !isObject(item)
  ) {
    return undefined;
  }
  const keys = s['x-kubernetes-list-map-keys'] ?? [];
  const olds: unknown[] = old.value;
  const match = olds.find((o) => isObject(o) && keys.every((k) => deepEqual(o[k], item[k])));
  return match === undefined ? undefined : { value: match };
}

/** The rule's text in messages: its message if it has one, else the rule. */
const ruleText = (r: ValidationRule): string =>
  r.message?.trim() ? r.message.trim() : r.rule.trim();

function runRules(
  x: unknown,
  s: OpenApiSchema,
  path: FieldPath,
  old: Old,
  unchanged: boolean,
  root: boolean,
  out: RuleOutcome,
): void {
  const rules = s['x-kubernetes-validations'] ?? [];
  if (rules.length === 0) return;
  const type = s.type ?? '';
  const self = toCel(x, s, root);
  const oldSelf = old ? toCel(old.value, s, root) : undefined;
  for (const rule of rules) {
    const c = compile(rule, s, root);
    if (c.error) {
      out.errors.push(fe.invalid(path, type, `rule compile error: compilation failed: ${c.error}`));
      continue;
    }
    if (c.usesOldSelf && !oldSelf && !rule.optionalOldSelf) continue;
    const bindings: Bindings = { self };
    if (rule.optionalOldSelf) bindings.oldSelf = celOptional(oldSelf);
    else if (oldSelf !== undefined) bindings.oldSelf = oldSelf;
    const result = evaluate(rule.rule, bindings);
    if (!result.ok) {
      out.errors.push(fe.invalid(path, type, evaluationError(result.message, rule)));
      continue;
    }
    if (result.value === true) continue;
    const value = type === 'object' || type === 'array' ? OMIT : x;
    const err = failure(
      rule,
      withFieldPath(path, rule.fieldPath),
      value,
      messageOf(rule, bindings),
    );
    if (!c.usesOldSelf && unchanged) out.warnings.push(errorLine(err));
    else out.errors.push(err);
  }
}

function evaluationError(message: string, rule: ValidationRule): string {
  return message.startsWith('no such overload')
    ? `'${message}': call arguments did not match a supported operator, function or macro signature for rule: ${ruleText(rule)}`
    : `${message} evaluating rule: ${ruleText(rule)}`;
}

/** A failed rule as a cause of the type its `reason` names (Invalid by default). */
function failure(rule: ValidationRule, at: FieldPath, value: unknown, detail: string): FieldError {
  switch (rule.reason) {
    case 'FieldValueForbidden':
      return fe.forbidden(at, detail);
    case 'FieldValueRequired':
      return fe.required(at, detail);
    case 'FieldValueDuplicate':
      return fe.duplicate(at, value);
    default:
      return fe.invalid(at, value, detail);
  }
}

/** validation.go's ruleErrorString: the rule's message, else "failed rule: <rule>". */
function ruleErrorString(rule: ValidationRule): string {
  const message = (rule.message ?? '').trim();
  return message.length > 0 ? message : `failed rule: ${rule.rule.trim()}`;
}

/**
 * The message of a failed rule, as validation.go's evalMessageExpression decides it: the
 * messageExpression is evaluated with the rule's own activation; a result that is not a
 * string, is blank, or has a line break is not used, and ruleErrorString answers.
 */
function messageOf(rule: ValidationRule, activation: Bindings): string {
  if (rule.messageExpression === undefined || rule.messageExpression === '') {
    return ruleErrorString(rule);
  }
  const evaluated = evaluate(rule.messageExpression, activation);
  if (!evaluated.ok || typeof evaluated.value !== 'string') return ruleErrorString(rule);
  const text = evaluated.value.trim();
  return text === '' || text.includes('\n') ? ruleErrorString(rule) : text;
}

/**
 * A rule's fieldPath (`.spec.x`, `['a.b']`, `.a['b\\'c']`) appended to the node's path:
 * read one character at a time, a `.name` step up to the next `.` or `[`, a `['...']`
 * step up to its unescaped closing quote.
 */
function withFieldPath(path: FieldPath, fieldPath: string | undefined): FieldPath {
  let out = path;
  let i = 0;
  const text = fieldPath ?? '';
  while (i < text.length) {
    if (text[i] === '.') {
      let end = i + 1;
      while (end < text.length && text[end] !== '.' && text[end] !== '[') end++;
      out = out.child(text.slice(i + 1, end));
      i = end;
    } else if (text.startsWith("['", i)) {
      let name = '';
      let end = i + 2;
      while (end < text.length && text[end] !== "'") {
        if (text[end] === '\\' && end + 1 < text.length) end++;
        name += text[end];
        end++;
      }
      out = out.child(name);
      i = end + 2; // past the quote and the bracket
    } else {
      i++; // not a step: skipped (this server does not validate fieldPath)
    }
  }
  return out;
}
