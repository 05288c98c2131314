// Shapes and small helpers shared by the structural-schema modules (structural*.ts).

/** One `x-kubernetes-validations` entry. */
export interface ValidationRule {
  rule: string;
  message?: string;
  fieldPath?: string;
  reason?: string;
  messageExpression?: string;
  optionalOldSelf?: boolean;
}

/** An OpenAPI v3 schema node as it appears in a CRD (JSON). */
export interface OpenApiSchema {
  type?: string;
  format?: string;
  description?: string;
  properties?: Record<string, OpenApiSchema>;
  additionalProperties?: OpenApiSchema | boolean;
  items?: OpenApiSchema;
  required?: string[];
  default?: unknown;
  nullable?: boolean;
  enum?: unknown[];
  allOf?: OpenApiSchema[];
  anyOf?: OpenApiSchema[];
  oneOf?: OpenApiSchema[];
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-embedded-resource'?: boolean;
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-validations'?: ValidationRule[];
  [key: string]: unknown;
}

/** One problem with one field, with the Kubernetes field path (`spec.methods[0]`). */
export interface FieldError {
  field: string;
  message: string;
  /** Kubernetes cause type: FieldValueInvalid, FieldValueRequired, FieldValueDuplicate, ... */
  reason: string;
}

/** The stored object's value at the same place, on an UPDATE. */
export type OldValue = { value: unknown } | undefined;

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The schema of `key` in an object: its own property, else `additionalProperties`. */
export function childSchema(
  schema: OpenApiSchema | undefined,
  key: string,
): OpenApiSchema | undefined {
  const props = schema?.properties;
  if (props && Object.hasOwn(props, key)) return props[key];
  return isObject(schema?.additionalProperties) ? schema.additionalProperties : undefined;
}

/** Whether `key` is a declared property (not reached through additionalProperties). */
export function isProperty(schema: OpenApiSchema | undefined, key: string): boolean {
  return schema?.properties !== undefined && Object.hasOwn(schema.properties, key);
}

/** JSON with sorted object keys, as Go's encoding/json writes maps. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    isObject(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v,
  );
}

/** JSON equality (object key order aside). */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((x, i) => sameJson(x, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return (
      keys.length === Object.keys(b).length &&
      keys.every((k) => Object.hasOwn(b, k) && sameJson(a[k], b[k]))
    );
  }
  return false;
}

/** The old item a list item correlates with: same keys in a `map` list, equal value in a `set`. */
export function correlatedItem(item: unknown, schema: OpenApiSchema, old: OldValue): OldValue {
  if (!old || !Array.isArray(old.value)) return undefined;
  const olds: unknown[] = old.value;
  const type = schema['x-kubernetes-list-type'];
  if (type === 'set') return olds.some((o) => sameJson(o, item)) ? { value: item } : undefined;
  if (type !== 'map' || !isObject(item)) return undefined;
  const keys = schema['x-kubernetes-list-map-keys'] ?? [];
  const match = olds.find((o) => isObject(o) && keys.every((k) => sameJson(o[k], item[k])));
  return match === undefined ? undefined : { value: match };
}

/** The old value of one key of an object. */
export function correlatedField(key: string, old: OldValue): OldValue {
  if (!old || !isObject(old.value) || !Object.hasOwn(old.value, key)) return undefined;
  return { value: old.value[key] };
}
