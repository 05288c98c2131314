// The structural-schema checks a CRD's openAPIV3Schema gets on create and update, with
// the API server's field paths and messages:
//
// - structurality (apiextensions-apiserver pkg/apiserver/schema/validation.go,
//   validateStructuralInvariants): every specified node has a `type` (unless
//   int-or-string or preserve-unknown-fields stands in), arrays have `items`, no
//   additionalProperties at the root, a root `metadata` that only restricts name and
//   generateName, embedded resources that are objects, and no types, defaults,
//   descriptions or extensions inside allOf/anyOf/oneOf/not. These errors come sorted.
// - the OpenAPI rules of pkg/apis/apiextensions/validation/validation.go
//   (ValidateCustomResourceDefinitionOpenAPISchema, validateMapListKeysMapSet): known
//   types, no uniqueItems, preserve-unknown-fields true or absent, list and map types
//   on arrays and objects, map-list keys that are item properties, scalar, not nullable
//   and required or defaulted, set items that are atomic, no nullable root.
//
// Left out: the completeness check (properties named in allOf & co. must exist outside
// them), validation and pruning of `default` values, `pattern` compilation, and the
// extra root restrictions a status subresource brings.
import { fe } from './errors.ts';
import { canonicalJson, isObject, type FieldError, type OpenApiSchema } from './types.ts';

type Level = 'root' | 'item' | 'field';

const OPENAPI_TYPES = ['array', 'boolean', 'integer', 'number', 'object', 'string'];

const EMPTY_TYPE: Record<Level, string> = {
  root: 'must not be empty at the root',
  item: 'must not be empty for specified array items',
  field: 'must not be empty for specified object fields',
};

const byText = (a: FieldError, b: FieldError): number => {
  const x = `${a.field}: ${a.message}`;
  const y = `${b.field}: ${b.message}`;
  return x < y ? -1 : x > y ? 1 : 0;
};

/**
 * The schemas of a CRD's versions with the field path the API server reports them at:
 * when every version has the same schema it keeps one (its internal
 * `spec.validation`), otherwise each at `spec.versions[i].schema.openAPIV3Schema`.
 */
export function crdSchemas(
  versions: readonly { schema?: { openAPIV3Schema?: OpenApiSchema } }[],
): [OpenApiSchema, string][] {
  const schemas = versions.map((v) => v.schema?.openAPIV3Schema);
  const [first] = schemas;
  if (first && schemas.every((s) => s && canonicalJson(s) === canonicalJson(first))) {
    return [[first, 'spec.validation.openAPIV3Schema']];
  }
  return schemas.flatMap((s, i) =>
    s ? [[s, `spec.versions[${i}].schema.openAPIV3Schema`] as [OpenApiSchema, string]] : [],
  );
}

/** The structural problems of a whole CRD (empty: its schemas pass). */
export function crdSchemaErrors(
  versions: readonly { schema?: { openAPIV3Schema?: OpenApiSchema } }[],
): FieldError[] {
  return crdSchemas(versions).flatMap(([s, path]) => schemaErrors(s, path));
}

/** All problems of one version's schema, in the API server's order. */
export function schemaErrors(schema: OpenApiSchema, path: string): FieldError[] {
  const errors: FieldError[] = [];
  if (schema.nullable === true) {
    errors.push(fe.forbidden(`${path}.nullable`, 'nullable cannot be true at the root'));
  }
  const structural: FieldError[] = [];
  invariants(schema, 'root', path, structural);
  errors.push(...structural.sort(byText));
  openApi(schema, path, true, undefined, errors);
  return errors;
}

// ---------------------------------------------------------------- structurality

/** validateStructuralInvariants over the tree (the caller sorts the errors). */
function invariants(s: OpenApiSchema, level: Level, path: string, out: FieldError[]): void {
  if (s.type === 'array' && !s.items) out.push(fe.required(`${path}.items`, 'must be specified'));
  if (s.items) invariants(s.items, 'item', `${path}.items`, out);
  for (const [k, sub] of Object.entries(s.properties ?? {})) {
    invariants(sub, 'field', `${path}.properties[${k}]`, out);
  }
  if (s.additionalProperties !== undefined && level === 'root') {
    out.push(fe.forbidden(`${path}.additionalProperties`, 'must not be used at the root'));
  }
  if (isObject(s.additionalProperties)) {
    invariants(s.additionalProperties, 'field', `${path}.additionalProperties`, out);
  }
  out.push(...intOrStringConflicts(s, path));
  junctors(s, path, isIntOrStringAnyOf(s.anyOf), out);
  out.push(...typeErrors(s, level, path));
  const embedded = s['x-kubernetes-embedded-resource'] === true;
  const checkMetadata = level === 'root' || embedded;
  for (const k of ['kind', 'apiVersion']) {
    const sub = s.properties?.[k];
    if (sub && checkMetadata && sub.type !== 'string') {
      out.push(fe.invalid(`${path}.properties[${k}].type`, sub.type ?? '', 'must be string'));
    }
  }
  const metadata = s.properties?.metadata;
  if (metadata) {
    metadataInvariants(metadata, checkMetadata, level, `${path}.properties[metadata]`, out);
  }
  if (embedded) out.push(...embeddedErrors(s, path));
}

/** x-kubernetes-int-or-string excludes preserve-unknown-fields and embedded-resource. */
function intOrStringConflicts(s: OpenApiSchema, path: string): FieldError[] {
  if (s['x-kubernetes-int-or-string'] !== true) return [];
  const detail = 'must be false if x-kubernetes-int-or-string is true';
  return (['x-kubernetes-preserve-unknown-fields', 'x-kubernetes-embedded-resource'] as const)
    .filter((ext) => s[ext] === true)
    .map((ext) => fe.invalid(`${path}.${ext}`, true, detail));
}

/** A node's type: object for embedded resources and the root, else present. */
function typeErrors(s: OpenApiSchema, level: Level, path: string): FieldError[] {
  const type = s.type ?? '';
  const errors: FieldError[] = [];
  if (s['x-kubernetes-embedded-resource'] === true && type !== 'object') {
    const detail = 'must be object if x-kubernetes-embedded-resource is true';
    errors.push(
      type === '' ? fe.required(`${path}.type`, detail) : fe.invalid(`${path}.type`, type, detail),
    );
  } else if (
    type === '' &&
    s['x-kubernetes-int-or-string'] !== true &&
    s['x-kubernetes-preserve-unknown-fields'] !== true
  ) {
    errors.push(fe.required(`${path}.type`, EMPTY_TYPE[level]));
  }
  if (level === 'root' && type !== '' && type !== 'object') {
    errors.push(fe.invalid(`${path}.type`, type, 'must be object at the root'));
  }
  return errors;
}

/** An embedded resource: no additionalProperties; properties unless it preserves fields. */
function embeddedErrors(s: OpenApiSchema, path: string): FieldError[] {
  const errors: FieldError[] = [];
  if (s.additionalProperties !== undefined) {
    errors.push(
      fe.forbidden(
        `${path}.additionalProperties`,
        'must not be used if x-kubernetes-embedded-resource is set',
      ),
    );
  }
  const preserve = s['x-kubernetes-preserve-unknown-fields'] === true;
  if (!preserve && Object.keys(s.properties ?? {}).length === 0) {
    errors.push(
      fe.required(
        `${path}.properties`,
        'must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields',
      ),
    );
  }
  return errors;
}

/**
 * metadata is implicit: at the root its schema may only restrict name and
 * generateName (validateStructuralMetadataInvariants compares what is left, with
 * type and default set aside, with an empty schema).
 */
function metadataInvariants(
  s: OpenApiSchema,
  checkMetadata: boolean,
  level: Level,
  path: string,
  out: FieldError[],
): void {
  if (checkMetadata && s.type !== 'object') {
    out.push(fe.invalid(`${path}.type`, s.type ?? '', 'must be object'));
  }
  if (level !== 'root') return;
  const { type: _t, default: _d, properties, ...rest } = s;
  const names = Object.keys(properties ?? {});
  const onlyNames = names.length > 0 && names.every((n) => n === 'name' || n === 'generateName');
  const left = Object.entries(rest).filter(([, v]) => v !== false);
  if ((names.length > 0 && !onlyNames) || left.length > 0) {
    out.push(
      fe.forbidden(
        path,
        'must not specify anything other than name and generateName, but metadata is implicitly specified',
      ),
    );
  }
}

/** `anyOf: [{type: integer}, {type: string}]`, the int-or-string pattern. */
function isIntOrStringAnyOf(anyOf: OpenApiSchema[] | undefined): boolean {
  return (
    anyOf?.length === 2 &&
    anyOf.every((a, i) => Object.keys(a).length === 1 && a.type === ['integer', 'string'][i])
  );
}

/** allOf, anyOf, oneOf and not hold value validations only (validateValueValidation). */
function junctors(s: OpenApiSchema, path: string, skipAnyOf: boolean, out: FieldError[]): void {
  if (!skipAnyOf) s.anyOf?.forEach((v, i) => nested(v, `${path}.anyOf[${i}]`, false, out));
  const skipFirstAnyOf = isIntOrStringAnyOf(s.allOf?.[0]?.anyOf);
  s.allOf?.forEach((v, i) => nested(v, `${path}.allOf[${i}]`, skipFirstAnyOf && i === 0, out));
  s.oneOf?.forEach((v, i) => nested(v, `${path}.oneOf[${i}]`, false, out));
  if (s.not) nested(s.not, `${path}.not`, false, out);
}

/** What may not appear in a value validation, and the API server's word for it. */
const NOT_IN_JUNCTORS: [key: string, present: (v: unknown) => boolean, detail: string][] = [
  ['type', (v) => typeof v === 'string' && v !== '', 'must be empty to be structural'],
  ['additionalProperties', (v) => v !== undefined, 'must be undefined to be structural'],
  ['default', (v) => v !== undefined, 'must be undefined to be structural'],
  ['title', (v) => typeof v === 'string' && v !== '', 'must be empty to be structural'],
  ['description', (v) => typeof v === 'string' && v !== '', 'must be empty to be structural'],
  ['nullable', (v) => v === true, 'must be false to be structural'],
  ['x-kubernetes-preserve-unknown-fields', (v) => v === true, 'must be false to be structural'],
  ['x-kubernetes-embedded-resource', (v) => v === true, 'must be false to be structural'],
  ['x-kubernetes-int-or-string', (v) => v === true, 'must be false to be structural'],
  [
    'x-kubernetes-list-map-keys',
    (v) => Array.isArray(v) && v.length > 0,
    'must be empty to be structural',
  ],
  ['x-kubernetes-list-type', (v) => v !== undefined, 'must be undefined to be structural'],
  ['x-kubernetes-map-type', (v) => v !== undefined, 'must be undefined to be structural'],
  [
    'x-kubernetes-validations',
    (v) => Array.isArray(v) && v.length > 0,
    'must be empty to be structural',
  ],
];

function nested(v: OpenApiSchema, path: string, skipAnyOf: boolean, out: FieldError[]): void {
  junctors(v, path, skipAnyOf, out);
  if (v.items) nested(v.items, `${path}.items`, false, out);
  for (const [k, sub] of Object.entries(v.properties ?? {})) {
    nested(sub, `${path}.properties[${k}]`, false, out);
  }
  for (const [key, present, detail] of NOT_IN_JUNCTORS) {
    if (present(v[key])) out.push(fe.forbidden(`${path}.${key}`, detail));
  }
  if (v.properties?.metadata) {
    out.push(
      fe.forbidden(`${path}.properties[metadata]`, 'must not be specified in a nested context'),
    );
  }
}

// ---------------------------------------------------------------- OpenAPI rules

/**
 * ValidateCustomResourceDefinitionOpenAPISchema, one node and what is below it, in its
 * order (the API server walks properties in Go's random map order; here, as written).
 * `noDefaults`: why defaults are refused here (below the root's metadata, kind,
 * apiVersion).
 */
function openApi(
  s: OpenApiSchema,
  path: string,
  root: boolean,
  noDefaults: string | undefined,
  out: FieldError[],
): void {
  out.push(...keywordErrors(s, path, noDefaults));
  if (isObject(s.additionalProperties)) {
    openApi(s.additionalProperties, `${path}.additionalProperties`, false, noDefaults, out);
  }
  for (const [k, sub] of Object.entries(s.properties ?? {})) {
    const topLevelMeta = root && ['metadata', 'kind', 'apiVersion'].includes(k);
    const why = topLevelMeta ? `in top-level ${k}` : noDefaults;
    openApi(sub, `${path}.properties[${k}]`, false, why, out);
  }
  if (s.not) openApi(s.not, `${path}.not`, false, noDefaults, out);
  for (const key of ['allOf', 'oneOf', 'anyOf'] as const) {
    s[key]?.forEach((sub, i) => openApi(sub, `${path}.${key}[${i}]`, false, noDefaults, out));
  }
  if (s.items) openApi(s.items, `${path}.items`, false, noDefaults, out);
  if (s['x-kubernetes-preserve-unknown-fields'] === false) {
    out.push(
      fe.invalid(
        `${path}.x-kubernetes-preserve-unknown-fields`,
        false,
        'must be true or undefined',
      ),
    );
  }
  out.push(...mapTypeErrors(s, path), ...listTypeErrors(s, path));
  if (s['x-kubernetes-list-type'] === 'map') out.push(...mapListKeys(s, path));
  out.push(...mapSetItems(s, path));
}

/** The node's own keywords: type, default, uniqueItems, properties beside additionalProperties. */
function keywordErrors(
  s: OpenApiSchema,
  path: string,
  noDefaults: string | undefined,
): FieldError[] {
  const errors: FieldError[] = [];
  if (s.type !== undefined && s.type !== '' && !OPENAPI_TYPES.includes(s.type)) {
    errors.push(fe.notSupported(`${path}.type`, s.type, OPENAPI_TYPES));
  }
  if (s.default !== undefined && noDefaults !== undefined) {
    errors.push(fe.forbidden(`${path}.default`, `must not be set ${noDefaults}`));
  }
  if (s.type === 'null') {
    errors.push(
      fe.forbidden(`${path}.type`, 'type cannot be set to null, use nullable as an alternative'),
    );
  }
  if (s.uniqueItems === true) {
    errors.push(
      fe.forbidden(
        `${path}.uniqueItems`,
        'uniqueItems cannot be set to true since the runtime complexity becomes quadratic',
      ),
    );
  }
  const additional = s.additionalProperties;
  if (
    additional !== undefined &&
    additional !== true &&
    Object.keys(s.properties ?? {}).length > 0
  ) {
    errors.push(
      fe.forbidden(
        `${path}.additionalProperties`,
        'additionalProperties and properties are mutual exclusive',
      ),
    );
  }
  return errors;
}

/** `type` must be `want` when extension `ext` is set. */
function typeFor(s: OpenApiSchema, path: string, want: string, ext: string): FieldError {
  const detail = `must be ${want} if ${ext} is specified`;
  return s.type ? fe.invalid(`${path}.type`, s.type, detail) : fe.required(`${path}.type`, detail);
}

function mapTypeErrors(s: OpenApiSchema, path: string): FieldError[] {
  const mapType = s['x-kubernetes-map-type'];
  if (mapType === undefined) return [];
  const errors: FieldError[] = [];
  if (s.type !== 'object') errors.push(typeFor(s, path, 'object', 'x-kubernetes-map-type'));
  if (mapType !== 'atomic' && mapType !== 'granular') {
    errors.push(fe.notSupported(`${path}.x-kubernetes-map-type`, mapType, ['atomic', 'granular']));
  }
  return errors;
}

function listTypeErrors(s: OpenApiSchema, path: string): FieldError[] {
  const listType = s['x-kubernetes-list-type'];
  const keys = s['x-kubernetes-list-map-keys'] ?? [];
  const errors: FieldError[] = [];
  if (listType !== undefined && s.type !== 'array') {
    errors.push(typeFor(s, path, 'array', 'x-kubernetes-list-type'));
  } else if (listType === 'set' && s.items) {
    errors.push(...setItemErrors(s.items, path));
  }
  if (listType !== undefined && !['atomic', 'set', 'map'].includes(listType)) {
    errors.push(
      fe.notSupported(`${path}.x-kubernetes-list-type`, listType, ['atomic', 'set', 'map']),
    );
  }
  if (keys.length > 0 && listType !== 'map') {
    const detail = 'must be map if x-kubernetes-list-map-keys is non-empty';
    errors.push(
      listType === undefined
        ? fe.required(`${path}.x-kubernetes-list-type`, detail)
        : fe.invalid(`${path}.x-kubernetes-list-type`, listType, detail),
    );
  }
  return errors;
}

/** A set's items compare whole, so they must be atomic. */
function setItemErrors(item: OpenApiSchema, path: string): FieldError[] {
  const detail = 'must be atomic as item of a list with x-kubernetes-list-type=set';
  const itemListType = item['x-kubernetes-list-type'];
  if (item.type === 'array' && itemListType !== undefined && itemListType !== 'atomic') {
    return [fe.invalid(`${path}.items.x-kubernetes-list-type`, itemListType, detail)];
  }
  if (item.type === 'object' && item['x-kubernetes-map-type'] !== 'atomic') {
    // The API server prints the item's list type here (usually unset: null).
    return [fe.invalid(`${path}.items.x-kubernetes-map-type`, itemListType ?? null, detail)];
  }
  return [];
}

/** A map list: keys, an object item schema, keys that are its scalar properties. */
function mapListKeys(s: OpenApiSchema, path: string): FieldError[] {
  const keys = s['x-kubernetes-list-map-keys'] ?? [];
  const item = s.items;
  const errors: FieldError[] = [];
  if (keys.length === 0) {
    errors.push(
      fe.required(
        `${path}.x-kubernetes-list-map-keys`,
        'must not be empty if x-kubernetes-list-type is map',
      ),
    );
  }
  if (!item) {
    return [
      ...errors,
      fe.required(`${path}.items`, 'must have a schema if x-kubernetes-list-type is map'),
    ];
  }
  if (item.type !== 'object') {
    const detail = "must be object if parent array's x-kubernetes-list-type is map";
    return [...errors, fe.invalid(`${path}.items.type`, item.type ?? '', detail)];
  }
  keys.forEach((k, i) => {
    const prop = item.properties?.[k];
    if (!prop) {
      const detail = 'entries must all be names of item properties';
      errors.push(fe.invalid(`${path}.x-kubernetes-list-map-keys`, keys, detail));
    } else if (prop.type === 'array' || prop.type === 'object') {
      // The API server prints the item's type here, not the key's.
      const detail = "must be a scalar type if parent array's x-kubernetes-list-type is map";
      errors.push(fe.invalid(`${path}.items.properties[${k}].type`, item.type, detail));
    }
    if (keys.indexOf(k) < i) {
      const detail = 'must not contain duplicate entries';
      errors.push(fe.invalid(`${path}.x-kubernetes-list-map-keys`, keys, detail));
    }
  });
  return errors;
}

/** validateMapListKeysMapSet: items and keys that cannot be nullable, keys that must be set. */
function mapSetItems(s: OpenApiSchema, path: string): FieldError[] {
  const listType = s['x-kubernetes-list-type'];
  const item = s.items;
  if (!item || (listType !== 'map' && listType !== 'set')) return [];
  const errors: FieldError[] = [];
  if (item.nullable === true) {
    const detail = `cannot be nullable when x-kubernetes-list-type is ${listType}`;
    errors.push(fe.forbidden(`${path}.items.nullable`, detail));
  }
  if (listType !== 'map') return errors;
  for (const k of s['x-kubernetes-list-map-keys'] ?? []) {
    const prop = item.properties?.[k];
    if (!prop) continue;
    const at = `${path}.items.properties[${k}]`;
    if (!(item.required ?? []).includes(k) && prop.default === undefined) {
      const detail =
        'this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property';
      errors.push(fe.required(`${at}.default`, detail));
    }
    if (prop.nullable === true) {
      const detail = 'this property is in x-kubernetes-list-map-keys, so it cannot be nullable';
      errors.push(fe.forbidden(`${at}.nullable`, detail));
    }
  }
  return errors;
}
