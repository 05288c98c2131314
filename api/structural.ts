// Structural-schema semantics of a Kubernetes API server, applied to an OpenAPI v3
// schema as it stands in a CRD, in the API server's order: decoding (pruning of unknown
// fields, nulls dropped, defaults; structural-decode.ts), validation of the OpenAPI
// schema (structural-schema.ts), list types and embedded resources
// (structural-lists.ts), then `x-kubernetes-validations` CEL rules
// (structural-rules.ts) unless an earlier error is of a kind that blocks them. On an
// UPDATE, values the update leaves as they were keep their errors to themselves
// (ratcheting).
//
// Used by the embedded server (which has no API server in front of it), so it answers
// a bad manifest the way a real cluster would.
import type { CelInput, CelValue } from '@bufbuild/cel';
import { checkRule, schemaRuleErrors } from './structural-cel-check.ts';
import { evaluate } from './structural-cel-env.ts';
import { celValue } from './structural-cel-values.ts';
import { defaultFields, pruneUnknown } from './structural-decode.ts';
import { listAndEmbeddedErrors } from './structural-lists.ts';
import { runRules } from './structural-rules.ts';
import { BLOCKING_REASONS, schemaErrors } from './structural-schema.ts';
import type { FieldError, OldValue, OpenApiSchema } from './structural-types.ts';

export type { FieldError, OpenApiSchema, ValidationRule } from './structural-types.ts';
export { celFieldName } from './structural-cel-values.ts';

/**
 * Remove fields the schema does not know; return their paths (sorted). Mutates `value`.
 * `root`: `value` is a whole object, whose apiVersion, kind and metadata are implicit.
 */
export function prune(
  value: unknown,
  schema: OpenApiSchema,
  path = '',
  root = path === '',
): string[] {
  return pruneUnknown(value, schema, path, root);
}

/**
 * Apply defaults after pruning, as the API server does: a `null` on a field that is not
 * nullable is dropped (or replaced by the field's default), a missing field with a
 * default gets a deep copy of it, and defaults inside a defaulted object apply too.
 */
export function applyDefaults(value: unknown, schema: OpenApiSchema): void {
  defaultFields(value, schema);
}

export interface Validation {
  errors: FieldError[];
  /** Rule failures ratcheted on an UPDATE (the API server sends them as warnings). */
  warnings: string[];
}

/** Whether any node of the schema has CEL rules. */
function hasRules(s: OpenApiSchema | undefined): boolean {
  if (!s) return false;
  if ((s['x-kubernetes-validations'] ?? []).length > 0) return true;
  const extra = typeof s.additionalProperties === 'object' ? s.additionalProperties : undefined;
  return [...Object.values(s.properties ?? {}), s.items, extra, ...(s.allOf ?? [])].some(hasRules);
}

/** Schema validation, list types, embedded resources and CEL rules, with warnings. */
export function validateWithWarnings(
  value: unknown,
  schema: OpenApiSchema,
  basePath = '',
  old?: OldValue,
): Validation {
  const errors = schemaErrors(value, schema, basePath, old);
  const shapes = listAndEmbeddedErrors(value, schema, basePath);
  errors.push(...shapes.embedded);
  // List-type errors the stored object already had do not block an update.
  if (!old || listAndEmbeddedErrors(old.value, schema, basePath).lists.length === 0) {
    errors.push(...shapes.lists);
  }
  if (!hasRules(schema)) return { errors, warnings: [] };
  // The API server adds a field-less cause here ("some validation rules were not
  // checked because the object was invalid"); it names no field, so it is left out.
  if (errors.some((e) => BLOCKING_REASONS.has(e.reason))) return { errors, warnings: [] };
  const rules = runRules(value, schema, basePath, old, basePath === '');
  return { errors: [...errors, ...rules.errors], warnings: rules.warnings };
}

/**
 * Schema validation, list-type uniqueness, embedded resources and CEL rules. `old` (the
 * stored object on an UPDATE) enables ratcheting and transition rules.
 */
export function validate(
  value: unknown,
  schema: OpenApiSchema,
  basePath = '',
  old?: { value: unknown },
): FieldError[] {
  return validateWithWarnings(value, schema, basePath, old).errors;
}

/** Prune, default and validate, in the API server's order. Returns the cleaned copy. */
export function admit(
  input: unknown,
  schema: OpenApiSchema,
  basePath = '',
  old?: { value: unknown },
): { value: unknown; unknownFields: string[]; errors: FieldError[]; warnings: string[] } {
  const value = structuredClone(input);
  const unknownFields = prune(value, schema, basePath);
  applyDefaults(value, schema);
  const { errors, warnings } = validateWithWarnings(value, schema, basePath, old);
  return { value, unknownFields, errors, warnings };
}

/**
 * Evaluate one CEL rule with `self` (and, for a transition rule, `oldSelf`) bound, the
 * values typed by `schema` when given. Returns true, false, or an error text.
 */
export function evalRule(
  rule: string,
  self: unknown,
  oldSelf?: { value: unknown },
  schema?: OpenApiSchema,
): true | false | string {
  const bindings: Record<string, CelValue> = { self: celValue(self, schema) };
  if (oldSelf) bindings.oldSelf = celValue(oldSelf.value, schema);
  const result = evaluate(rule, bindings);
  if (!result.ok) return result.message;
  return result.value === true;
}

/**
 * Compile-check a CEL rule (a CRD whose rules do not compile is rejected). With the
 * schema node it belongs to, field selections are checked too (`self.nmae`).
 */
export function celCompileError(
  rule: string,
  schema?: OpenApiSchema,
  root = false,
): string | undefined {
  return checkRule(rule, schema, root).error;
}

/** Every rule problem of a CRD version's schema, as a CRD create or update reports them. */
export function crdRuleErrors(
  schema: OpenApiSchema,
  path = 'spec.validation.openAPIV3Schema',
): FieldError[] {
  return schemaRuleErrors(schema, path);
}

/** JSON → CEL runtime values, typed by `schema` (untyped: whole numbers become ints). */
export function toCel(value: unknown, schema?: OpenApiSchema): CelInput {
  return celValue(value, schema);
}
