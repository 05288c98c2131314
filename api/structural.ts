// Structural-schema semantics of a Kubernetes API server, applied to an OpenAPI v3
// schema as it stands in a CRD: pruning of unknown fields, defaulting, validation
// (ajv), list-map key uniqueness and `x-kubernetes-validations` CEL rules.
//
// Used by the embedded server (which has no API server in front of it) and by the
// in-memory API server under test/, so both answer a bad manifest the way a real
// cluster would.
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { run, parse, isCelError, type CelInput } from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';

/** An OpenAPI v3 schema node as it appears in a CRD (JSON). */
export interface OpenApiSchema {
  type?: string;
  description?: string;
  properties?: Record<string, OpenApiSchema>;
  additionalProperties?: OpenApiSchema | boolean;
  items?: OpenApiSchema;
  required?: string[];
  default?: unknown;
  nullable?: boolean;
  enum?: unknown[];
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-validations'?: {
    rule: string;
    message?: string;
    fieldPath?: string;
    reason?: string;
    messageExpression?: string;
    optionalOldSelf?: boolean;
  }[];
  [key: string]: unknown;
}

/** One problem with one field, with the Kubernetes field path (`spec.methods[0]`). */
export interface FieldError {
  field: string;
  message: string;
  /** Kubernetes cause type: FieldValueInvalid, FieldValueRequired, FieldValueDuplicate, ... */
  reason: string;
}

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

function newAjv(): Ajv {
  const ajv = new Ajv({ allErrors: true, strict: false, useDefaults: false });
  addFormats(ajv);
  return ajv;
}

const ajv = newAjv();
const compiled = new WeakMap<OpenApiSchema, ValidateFunction>();

// ---------------------------------------------------------------- pruning

/** Remove fields the schema does not know; return their paths. Mutates `value`. */
export function prune(value: unknown, schema: OpenApiSchema, path = ''): string[] {
  if (schema['x-kubernetes-preserve-unknown-fields'] && !schema.properties) return [];
  const unknown: string[] = [];
  if (Array.isArray(value) && schema.items) {
    value.forEach((item, i) =>
      unknown.push(...prune(item, schema.items as OpenApiSchema, `${path}[${i}]`)),
    );
  } else if (isObject(value) && (schema.type === 'object' || schema.properties)) {
    for (const key of Object.keys(value)) {
      const child = childSchema(schema, key);
      const childPath = path ? `${path}.${key}` : key;
      if (!child) {
        if (!schema['x-kubernetes-preserve-unknown-fields']) {
          unknown.push(childPath);
          delete value[key];
        }
        continue;
      }
      unknown.push(...prune(value[key], child, childPath));
    }
  }
  return unknown;
}

// ---------------------------------------------------------------- defaulting

/**
 * Apply defaults after pruning, as the API server does: a missing field with a
 * default gets it (deep-copied), and a `null` on a non-nullable field is dropped and
 * then defaulted. Defaults inside a defaulted object are applied too.
 */
export function applyDefaults(value: unknown, schema: OpenApiSchema): void {
  if (Array.isArray(value) && schema.items) {
    for (const item of value) applyDefaults(item, schema.items);
    return;
  }
  if (!isObject(value) || !schema.properties) return;
  for (const [key, child] of Object.entries(schema.properties)) {
    if (value[key] === null && !child.nullable) delete value[key];
    if (value[key] === undefined && child.default !== undefined)
      value[key] = structuredClone(child.default);
    if (value[key] !== undefined) applyDefaults(value[key], child);
  }
  if (isObject(schema.additionalProperties)) {
    for (const key of Object.keys(value)) applyDefaults(value[key], schema.additionalProperties);
  }
}

// ---------------------------------------------------------------- validation

/**
 * Schema validation, list-map uniqueness and CEL rules. `old` (the stored object on an
 * UPDATE) enables transition rules: a rule that mentions `oldSelf` runs only where the
 * old value correlates (same object key, same list-map key), and is skipped otherwise.
 */
export function validate(
  value: unknown,
  schema: OpenApiSchema,
  basePath = '',
  old?: { value: unknown },
): FieldError[] {
  let fn = compiled.get(schema);
  if (!fn) {
    fn = ajv.compile(stripVendorKeys(schema) as object);
    compiled.set(schema, fn);
  }
  const errors: FieldError[] = [];
  if (!fn(value)) errors.push(...(fn.errors ?? []).map((e) => ajvToFieldError(e, basePath)));
  // Rules and list keys only make sense on data of the right shape.
  if (errors.length === 0) walkRules(value, schema, basePath, errors, old);
  return errors;
}

/** Prune, default and validate, in the API server's order. Returns the cleaned copy. */
export function admit(
  input: unknown,
  schema: OpenApiSchema,
  basePath = '',
): { value: unknown; unknownFields: string[]; errors: FieldError[] } {
  const value = structuredClone(input);
  const unknownFields = prune(value, schema, basePath);
  applyDefaults(value, schema);
  return { value, unknownFields, errors: validate(value, schema, basePath) };
}

function walkRules(
  value: unknown,
  schema: OpenApiSchema,
  path: string,
  errors: FieldError[],
  old?: { value: unknown },
): void {
  if (value === undefined || value === null) return;
  checkRules(value, schema, path, errors, old);
  if (Array.isArray(value) && schema.items) {
    checkListKeys(value, schema, path, errors);
    value.forEach((item, i) =>
      walkRules(
        item,
        schema.items as OpenApiSchema,
        `${path}[${i}]`,
        errors,
        correlateItem(item, schema, old),
      ),
    );
  } else if (isObject(value)) {
    for (const [key, child] of Object.entries(value)) {
      const sub = childSchema(schema, key);
      const oldChild =
        old && isObject(old.value) && old.value[key] !== undefined
          ? { value: old.value[key] }
          : undefined;
      if (sub) walkRules(child, sub, path ? `${path}.${key}` : key, errors, oldChild);
    }
  }
}

function checkRules(
  value: unknown,
  schema: OpenApiSchema,
  path: string,
  errors: FieldError[],
  old?: { value: unknown },
): void {
  const rules = schema['x-kubernetes-validations'] ?? [];
  if (rules.length === 0) return;
  // Set and map lists compare equal whatever their order, as in the API server's CEL.
  const self = unorderedListsSorted(value, schema);
  const oldSelf = old ? { value: unorderedListsSorted(old.value, schema) } : undefined;
  for (const rule of rules) {
    const transition = /\boldSelf\b/.test(rule.rule);
    // Transition rules need a correlated old value (optionalOldSelf is not modelled:
    // such rules are skipped on CREATE too).
    if (transition && !oldSelf) continue;
    const result = evalRule(rule.rule, self, transition ? oldSelf : undefined);
    if (result !== true) {
      const field = `${path}${rule.fieldPath ?? ''}`.replace(/^\./, '');
      const message =
        typeof result === 'string'
          ? `rule evaluation failed: ${result}`
          : ruleMessage(rule, self, transition ? oldSelf : undefined);
      errors.push({ field, message, reason: rule.reason ?? 'FieldValueInvalid' });
    }
  }
}

/**
 * A copy of `value` in which every `x-kubernetes-list-type: set` or `map` list is in a
 * canonical order (sets by value, maps by their keys), so that CEL list equality
 * ignores their order. Indexing such a list in a rule sees the sorted order.
 */
function unorderedListsSorted(value: unknown, schema: OpenApiSchema | undefined): unknown {
  if (!schema) return value;
  if (Array.isArray(value)) {
    const items = value.map((item) => unorderedListsSorted(item, schema.items));
    const type = schema['x-kubernetes-list-type'];
    if (type !== 'set' && type !== 'map') return items;
    const keys = schema['x-kubernetes-list-map-keys'] ?? [];
    const sortKey = (item: unknown): string =>
      type === 'set'
        ? canonicalJson(item)
        : canonicalJson(keys.map((k) => (isObject(item) ? item[k] : null)));
    return items
      .map((item) => ({ item, key: sortKey(item) }))
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
      .map(({ item }) => item);
  }
  if (isObject(value)) {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, unorderedListsSorted(v, childSchema(schema, k))]),
    );
  }
  return value;
}

function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    isObject(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v,
  );
}

/** A failed rule's message: messageExpression (when it yields a string), message, default. */
function ruleMessage(
  rule: { rule: string; message?: string; messageExpression?: string },
  self: unknown,
  old?: { value: unknown },
): string {
  if (rule.messageExpression) {
    try {
      const bindings: Record<string, CelInput> = { self: toCel(self) as CelInput };
      if (old) bindings.oldSelf = toCel(old.value) as CelInput;
      const text: unknown = run(rule.messageExpression, bindings, { funcs: strings });
      if (typeof text === 'string' && text.trim() !== '') return text;
    } catch {
      // fall through to the static message, as the API server does
    }
  }
  return rule.message ?? `failed rule: ${rule.rule}`;
}

/** Items of `x-kubernetes-list-type: map` lists correlate with the old item of the same keys. */
function correlateItem(
  item: unknown,
  schema: OpenApiSchema,
  old?: { value: unknown },
): { value: unknown } | undefined {
  if (!old || !Array.isArray(old.value) || schema['x-kubernetes-list-type'] !== 'map') {
    return undefined;
  }
  const keys = schema['x-kubernetes-list-map-keys'] ?? [];
  if (!isObject(item)) return undefined;
  const oldItems: unknown[] = old.value;
  const match = oldItems.find((o) => isObject(o) && keys.every((k) => o[k] === item[k]));
  return match === undefined ? undefined : { value: match };
}

function checkListKeys(
  list: unknown[],
  schema: OpenApiSchema,
  path: string,
  errors: FieldError[],
): void {
  const type = schema['x-kubernetes-list-type'];
  if (type !== 'set' && type !== 'map') return;
  const keys = schema['x-kubernetes-list-map-keys'] ?? [];
  const seen = new Set<string>();
  list.forEach((item, i) => {
    const keyValues = type === 'set' ? [] : keys.map((k) => (isObject(item) ? item[k] : undefined));
    const identity = type === 'set' ? JSON.stringify(item) : JSON.stringify(keyValues);
    if (seen.has(identity)) {
      const shown =
        type === 'set'
          ? JSON.stringify(item)
          : `{${keys.map((k, j) => `"${k}":${JSON.stringify(keyValues[j])}`).join(',')}}`;
      errors.push({
        field: `${path}[${i}]`,
        message: `Duplicate value: ${shown}`,
        reason: 'FieldValueDuplicate',
      });
    }
    seen.add(identity);
  });
}

/**
 * Evaluate one CEL rule with `self` (and, for a transition rule, `oldSelf`) bound.
 * Returns true, false, or an error text.
 */
export function evalRule(
  rule: string,
  self: unknown,
  oldSelf?: { value: unknown },
): true | false | string {
  try {
    const bindings: Record<string, CelInput> = { self: toCel(self) as CelInput };
    if (oldSelf) bindings.oldSelf = toCel(oldSelf.value) as CelInput;
    const result = run(rule, bindings, { funcs: strings });
    if (isCelError(result)) return result.message;
    return result === true;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/** Compile-check a CEL rule (a CRD whose rules do not compile is rejected). */
export function celCompileError(rule: string): string | undefined {
  try {
    // `run` reports syntax errors as a CelError result rather than throwing; `parse`
    // throws on them.
    parse(rule);
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/** JSON → CEL runtime values: objects become maps, whole numbers become ints. */
export function toCel(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(toCel);
  if (isObject(value)) return new Map(Object.entries(value).map(([k, v]) => [k, toCel(v)]));
  if (typeof value === 'number' && Number.isInteger(value)) return BigInt(value);
  return value;
}

function ajvToFieldError(e: ErrorObject, basePath: string): FieldError {
  let field = joinPath(basePath, e.instancePath);
  let message = e.message ?? 'is invalid';
  let reason = 'FieldValueInvalid';
  if (e.keyword === 'required') {
    const missing = (e.params as { missingProperty: string }).missingProperty;
    field = field ? `${field}.${missing}` : missing;
    message = 'Required value';
    reason = 'FieldValueRequired';
  } else if (e.keyword === 'enum') {
    const allowed = (e.params as { allowedValues: unknown[] }).allowedValues;
    message = `Unsupported value: supported values: ${allowed.map((v) => JSON.stringify(v)).join(', ')}`;
    reason = 'FieldValueNotSupported';
  } else if (e.keyword === 'type') {
    message = `Invalid value: must be of type ${(e.params as { type: string }).type}`;
    reason = 'FieldValueTypeInvalid';
  } else if (e.keyword === 'pattern') {
    message = `Invalid value: should match '${(e.params as { pattern: string }).pattern}'`;
  }
  return { field, message, reason };
}

function joinPath(base: string, pointer: string): string {
  let out = base;
  for (const raw of pointer.split('/').slice(1)) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    out = /^\d+$/.test(part) ? `${out}[${part}]` : out ? `${out}.${part}` : part;
  }
  return out;
}

function childSchema(schema: OpenApiSchema, key: string): OpenApiSchema | undefined {
  const direct = schema.properties?.[key];
  if (direct) return direct;
  if (isObject(schema.additionalProperties)) return schema.additionalProperties;
  return undefined;
}

function stripVendorKeys(schema: unknown): unknown {
  if (!isObject(schema)) return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) {
    if (k.startsWith('x-kubernetes-') || k === 'default' || k === 'nullable') continue;
    if (k === 'properties' && isObject(v)) {
      out[k] = Object.fromEntries(
        Object.entries(v).map(([name, sub]) => [name, stripVendorKeys(sub)]),
      );
    } else if (k === 'items' || k === 'additionalProperties') {
      out[k] = stripVendorKeys(v);
    } else if (k === 'allOf' || k === 'anyOf' || k === 'oneOf') {
      out[k] = (v as unknown[]).map(stripVendorKeys);
    } else if (k === 'not') {
      out[k] = stripVendorKeys(v);
    } else {
      out[k] = v;
    }
  }
  if (schema.nullable === true && typeof out.type === 'string') out.type = [out.type, 'null'];
  return out;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
