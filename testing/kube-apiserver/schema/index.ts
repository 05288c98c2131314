// The test API server's own structural-schema semantics, in the API server's order:
// decoding prunes unknown fields (prune.ts), drops nulls on non-nullable fields and
// applies defaults (defaults.ts); validation checks the OpenAPI schema (validate.ts),
// embedded resources (embedded.ts) and list types (listtype.ts), then CEL rules
// (cel.ts) unless an error already made the object unfit for them.
import { applyDefaults, pruneNulls } from './defaults.ts';
import { validateEmbedded } from './embedded.ts';
import { fe } from './errors.ts';
import { validateListTypes } from './listtype.ts';
import { prune } from './prune.ts';
import { validateRules } from './cel.ts';
import { isObject, type FieldError, type OpenApiSchema } from './types.ts';
import { validateSchema } from './validate.ts';

export type { FieldError, OpenApiSchema, ValidationRule } from './types.ts';
export { crdRuleErrors, ruleErrors } from './crd-rules.ts';
export { crdSchemaErrors } from './structural.ts';

/**
 * What decoding a request body does to a custom resource (in place): prune, drop
 * nulls, default. Returns the pruned fields' paths, sorted.
 */
export function decode(obj: Record<string, unknown>, schema: OpenApiSchema): string[] {
  const unknown = prune(obj, schema, true);
  pruneNulls(obj, schema);
  applyDefaults(obj, schema);
  return unknown;
}

export interface Verdict {
  errors: FieldError[];
  /** Rule failures ratcheted on an UPDATE (sent as Warning headers). */
  warnings: string[];
}

/** Causes after which the API server does not run CEL rules. */
const BLOCKING = new Set([
  'FieldValueNotSupported',
  'FieldValueRequired',
  'FieldValueTooLong',
  'FieldValueTooMany',
  'FieldValueTypeInvalid',
]);

function hasRules(s: OpenApiSchema | undefined): boolean {
  if (!s) return false;
  if ((s['x-kubernetes-validations'] ?? []).length > 0) return true;
  const subs = [
    ...Object.values(s.properties ?? {}),
    s.items,
    isObject(s.additionalProperties) ? s.additionalProperties : undefined,
    ...(s.allOf ?? []),
  ];
  return subs.some(hasRules);
}

/** Validate a decoded object; `old` (the stored object of an UPDATE) enables ratcheting and transition rules. */
export function validateObject(obj: unknown, schema: OpenApiSchema, old?: unknown): Verdict {
  const oldRef = old === undefined ? undefined : { value: old };
  const errors = [...validateSchema(obj, schema, oldRef), ...validateEmbedded(obj, schema)];
  // List-type errors the stored object already had do not block an update.
  if (old === undefined || validateListTypes(old, schema).length === 0) {
    errors.push(...validateListTypes(obj, schema));
  }
  if (!hasRules(schema)) return { errors, warnings: [] };
  if (errors.some((e) => BLOCKING.has(e.reason))) {
    errors.push(
      fe.invalid(
        '<nil>',
        null,
        'some validation rules were not checked because the object was invalid; correct the existing errors to complete validation',
      ),
    );
    return { errors, warnings: [] };
  }
  const rules = validateRules(obj, schema, oldRef);
  return { errors: [...errors, ...rules.errors], warnings: rules.warnings };
}
