// The shapes the schema modules share: an OpenAPI v3 schema node as a CRD carries it,
// one field error, and small helpers for JSON values and Kubernetes field paths.

/** One `x-kubernetes-validations` entry. */
export interface ValidationRule {
  rule: string;
  message?: string;
  messageExpression?: string;
  reason?: string;
  fieldPath?: string;
  optionalOldSelf?: boolean;
}

/** An OpenAPI v3 schema node as it appears in a CRD version (JSON). */
export interface OpenApiSchema {
  type?: string;
  format?: string;
  description?: string;
  title?: string;
  properties?: Record<string, OpenApiSchema>;
  additionalProperties?: OpenApiSchema | boolean;
  items?: OpenApiSchema;
  required?: string[];
  default?: unknown;
  nullable?: boolean;
  enum?: unknown[];
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  multipleOf?: number;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  minProperties?: number;
  maxProperties?: number;
  allOf?: OpenApiSchema[];
  anyOf?: OpenApiSchema[];
  oneOf?: OpenApiSchema[];
  not?: OpenApiSchema;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-embedded-resource'?: boolean;
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-map-type'?: 'granular' | 'atomic';
  'x-kubernetes-validations'?: ValidationRule[];
  [key: string]: unknown;
}

/**
 * One problem with one field, as a `Status` cause: `field` is the Kubernetes field
 * path (`spec.methods[0]`, `<nil>` for the root), `message` the text without the
 * field, `reason` the cause type (FieldValueInvalid, FieldValueRequired, ...).
 */
export interface FieldError {
  field: string;
  message: string;
  reason: string;
}

export type JsonObject = Record<string, unknown>;

export function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The `properties` entry for `key` (own keys only: `constructor` is no property). */
export function property(
  schema: OpenApiSchema | undefined,
  key: string,
): OpenApiSchema | undefined {
  const props = schema?.properties;
  return props && Object.hasOwn(props, key) ? props[key] : undefined;
}

/** The schema of one key of an object: its property, else additionalProperties. */
export function fieldSchema(
  schema: OpenApiSchema | undefined,
  key: string,
): OpenApiSchema | undefined {
  const prop = property(schema, key);
  if (prop) return prop;
  return isObject(schema?.additionalProperties) ? schema.additionalProperties : undefined;
}

/** JSON with object keys sorted (Go's encoding/json order), for comparing and printing. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    isObject(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v,
  );
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return (
      keys.length === Object.keys(b).length &&
      keys.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]))
    );
  }
  return false;
}

/**
 * A Kubernetes field path (apimachinery `field.Path`): `child` adds `.name` (no dot at
 * the root), `index` adds `[3]`, `key` adds `[key]`; the empty root prints `<nil>`.
 */
export class FieldPath {
  private readonly text: string;
  private constructor(text: string) {
    this.text = text;
  }
  static readonly root = new FieldPath('');
  child(name: string): FieldPath {
    return new FieldPath(this.text ? `${this.text}.${name}` : name);
  }
  index(i: number): FieldPath {
    return new FieldPath(`${this.text}[${i}]`);
  }
  key(k: string): FieldPath {
    return new FieldPath(`${this.text}[${k}]`);
  }
  toString(): string {
    return this.text === '' ? '<nil>' : this.text;
  }
}
