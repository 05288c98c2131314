// `x-kubernetes-validations` rules, node by node. `self` is the node typed by its schema
// (structural-cel-values.ts); a transition rule (one naming `oldSelf`) runs on an
// UPDATE where the node has a correlated old value (same object key, same keys in a
// `map` list), and on CREATE too when `optionalOldSelf` makes `oldSelf` an optional.
// A failure reports the messageExpression (a non-empty one-line string), else the
// message, else `failed rule: <rule>`, at the node plus `fieldPath`, as the cause the
// `reason` names. Ratcheting: a rule without `oldSelf` failing on a value the update
// did not change is a warning, not an error.
import type { CelValue } from '@bufbuild/cel';
import { celOptional, evaluate } from './structural-cel-env.ts';
import { checkRule } from './structural-cel-check.ts';
import { celValue } from './structural-cel-values.ts';
import { shownValue } from './structural-messages.ts';
import {
  correlatedField,
  isObject,
  isProperty,
  sameJson,
  type FieldError,
  type OldValue,
  type OpenApiSchema,
  type ValidationRule,
} from './structural-types.ts';

export interface RuleResults {
  errors: FieldError[];
  warnings: string[];
}

/** Run every rule over `value`; `whole`: `value` is a whole object (the resource root). */
export function runRules(
  value: unknown,
  schema: OpenApiSchema,
  path: string,
  old: OldValue,
  whole: boolean,
): RuleResults {
  const out: RuleResults = { errors: [], warnings: [] };
  walk(value, schema, path, old, false, whole, out);
  return out;
}

const child = (path: string, key: string): string => (path ? `${path}.${key}` : key);

function walk(
  value: unknown,
  schema: OpenApiSchema,
  path: string,
  old: OldValue,
  parentUnchanged: boolean,
  whole: boolean,
  out: RuleResults,
): void {
  if (value === null || value === undefined) return;
  const unchanged = old ? sameJson(value, old.value) : parentUnchanged;
  nodeRules(value, schema, path, old, unchanged, whole, out);
  for (const sub of schema.allOf ?? []) walk(value, sub, path, old, unchanged, whole, out);
  if (Array.isArray(value) && schema.items) {
    const items = schema.items;
    value.forEach((item, i) =>
      walk(item, items, `${path}[${i}]`, mapItem(item, schema, old), unchanged, false, out),
    );
  } else if (isObject(value)) {
    for (const [key, v] of Object.entries(value)) {
      const oldChild = correlatedField(key, old);
      const correlated = oldChild && oldChild.value !== null ? oldChild : undefined;
      if (isProperty(schema, key)) {
        const sub = schema.properties?.[key];
        if (sub) walk(v, sub, child(path, key), correlated, unchanged, false, out);
      } else if (isObject(schema.additionalProperties)) {
        walk(v, schema.additionalProperties, `${path}[${key}]`, correlated, unchanged, false, out);
      }
    }
  }
}

/** Only items of `map` lists have old values (by their keys). */
function mapItem(item: unknown, schema: OpenApiSchema, old: OldValue): OldValue {
  if (!old || !Array.isArray(old.value) || schema['x-kubernetes-list-type'] !== 'map')
    return undefined;
  if (!isObject(item)) return undefined;
  const keys = schema['x-kubernetes-list-map-keys'] ?? [];
  const olds: unknown[] = old.value;
  const match = olds.find((o) => isObject(o) && keys.every((k) => sameJson(o[k], item[k])));
  return match === undefined ? undefined : { value: match };
}

const checks = new WeakMap<ValidationRule, ReturnType<typeof checkRule>>();

function nodeRules(
  value: unknown,
  schema: OpenApiSchema,
  path: string,
  old: OldValue,
  unchanged: boolean,
  whole: boolean,
  out: RuleResults,
): void {
  const rules = schema['x-kubernetes-validations'] ?? [];
  if (rules.length === 0) return;
  const type = schema.type ?? '';
  const at = path || '<nil>';
  const self = celValue(value, schema, whole);
  const oldSelf = old ? celValue(old.value, schema, whole) : undefined;
  for (const rule of rules) {
    let checked = checks.get(rule);
    if (!checked) {
      checked = checkRule(rule.rule, schema, whole);
      checks.set(rule, checked);
    }
    if (checked.error) {
      out.errors.push(
        invalid(at, shownValue(type), `rule compile error: compilation failed: ${checked.error}`),
      );
      continue;
    }
    if (checked.usesOldSelf && oldSelf === undefined && !rule.optionalOldSelf) continue;
    const bindings: Record<string, CelValue> = { self };
    if (rule.optionalOldSelf) bindings.oldSelf = celOptional(oldSelf);
    else if (oldSelf !== undefined) bindings.oldSelf = oldSelf;
    const result = evaluate(rule.rule, bindings);
    if (!result.ok) {
      out.errors.push(invalid(at, shownValue(type), evaluationError(result.message, rule)));
      continue;
    }
    if (result.value === true) continue;
    const shown = type === 'object' || type === 'array' ? undefined : shownValue(value);
    const err = failure(
      rule,
      withFieldPath(path, rule.fieldPath),
      shown,
      message(rule, self, oldSelf),
    );
    if (!checked.usesOldSelf && unchanged) out.warnings.push(`${err.field}: ${err.message}`);
    else out.errors.push(err);
  }
}

function invalid(field: string, shown: string | undefined, detail: string): FieldError {
  const label = shown === undefined ? 'Invalid value' : `Invalid value: ${shown}`;
  return { field, message: `${label}: ${detail}`, reason: 'FieldValueInvalid' };
}

const ruleText = (r: ValidationRule): string =>
  r.message?.trim() ? r.message.trim() : r.rule.trim();

function evaluationError(message: string, rule: ValidationRule): string {
  return message.startsWith('no such overload')
    ? `'${message}': call arguments did not match a supported operator, function or macro signature for rule: ${ruleText(rule)}`
    : `${message} evaluating rule: ${ruleText(rule)}`;
}

function failure(
  rule: ValidationRule,
  field: string,
  shown: string | undefined,
  detail: string,
): FieldError {
  const at = field || '<nil>';
  switch (rule.reason) {
    case 'FieldValueForbidden':
      return { field: at, message: `Forbidden: ${detail}`, reason: rule.reason };
    case 'FieldValueRequired':
      return { field: at, message: `Required value: ${detail}`, reason: rule.reason };
    case 'FieldValueDuplicate':
      return { field: at, message: `Duplicate value: ${shown ?? '""'}`, reason: rule.reason };
    default:
      return invalid(at, shown, detail);
  }
}

function message(rule: ValidationRule, self: CelValue, oldSelf: CelValue | undefined): string {
  if (rule.messageExpression) {
    const bindings: Record<string, CelValue> = { self };
    if (oldSelf !== undefined) bindings.oldSelf = oldSelf;
    const text = evaluate(rule.messageExpression, bindings);
    if (text.ok && typeof text.value === 'string') {
      const trimmed = text.value.trim();
      if (trimmed !== '' && !trimmed.includes('\n')) return trimmed;
    }
  }
  return rule.message?.trim() ? rule.message.trim() : `failed rule: ${rule.rule.trim()}`;
}

/** A rule's fieldPath (`.spec.x`, `['a.b']`) appended to the node's path. */
function withFieldPath(path: string, fieldPath: string | undefined): string {
  if (!fieldPath) return path;
  let out = path;
  for (const m of fieldPath.matchAll(/\.([^.[]+)|\['((?:[^'\\]|\\.)*)'\]/g)) {
    out = child(out, m[1] ?? (m[2] ?? '').replace(/\\(.)/g, '$1'));
  }
  return out;
}
