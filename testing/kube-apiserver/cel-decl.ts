// The CEL view of an OpenAPI schema, as apiextensions-apiserver builds it for cost
// estimation (k8s.io/apiserver/pkg/cel/common SchemaDeclType): every node gets a
// CEL type, the largest number of elements it can hold (`maxElements`: characters
// of a string, items of a list, entries of a map) and the smallest size its JSON
// can have (`minSize`). Unbounded strings, lists and maps are bounded by what fits
// into one request (3 MiB). Written from the Kubernetes sources; it reads plain
// schema JSON and imports nothing of the product.

/** The largest request body the API server accepts, and so the size bound of last resort. */
export const MAX_REQUEST_SIZE_BYTES = 3 * 1024 * 1024;

// Serialized sizes used by the estimate (k8s.io/apiserver/pkg/cel/limits.go).
const MIN_STRING_SIZE = 2; // ""
const MIN_BOOL_SIZE = 4; // true
const MIN_NUMBER_SIZE = 1; // 0
const MIN_DURATION_SIZE = 3; // "0"
const MAX_DURATION_SIZE = 32;
const DATE_SIZE = 12; // "YYYY-MM-DD"
const MIN_DATETIME_SIZE = 21;
const MAX_DATETIME_SIZE = 32;

/** A schema node as found in a CRD's openAPIV3Schema (only what the estimate reads). */
export interface SchemaNode {
  type?: string;
  format?: string;
  enum?: unknown[];
  default?: unknown;
  maxLength?: number;
  maxItems?: number;
  maxProperties?: number;
  required?: string[];
  properties?: Record<string, SchemaNode>;
  items?: SchemaNode;
  additionalProperties?: SchemaNode | boolean;
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-embedded-resource'?: boolean;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-validations'?: { rule?: string; messageExpression?: string }[];
}

export type DeclKind =
  | 'object'
  | 'list'
  | 'map'
  | 'string'
  | 'bytes'
  | 'duration'
  | 'timestamp'
  | 'int'
  | 'double'
  | 'bool'
  | 'dyn';

/** The CEL declaration of a schema node. */
export interface Decl {
  kind: DeclKind;
  /** Characters (strings: maxLength × 4 bytes), items or entries; 0 for scalars and objects. */
  maxElements: number;
  /** Smallest JSON serialization, in bytes. */
  minSize: number;
  /** Object fields by their CEL (escaped) names. */
  fields?: Map<string, Decl>;
  /** List items or map values. */
  elem?: Decl;
  /** Map keys. */
  key?: Decl;
}

const scalar = (kind: DeclKind, minSize: number, maxElements = 0): Decl => ({
  kind,
  minSize,
  maxElements,
});

/** Map keys: a plain CEL string with no size information. */
const MAP_KEY = scalar('string', MIN_STRING_SIZE);

/** Items of an unbounded list that fit into one request. */
export function maxItemsPerRequest(itemMinSize: number): number {
  return Math.floor((MAX_REQUEST_SIZE_BYTES - 2) / (itemMinSize + 1));
}

/** Entries of an unbounded map that fit into one request (key, quotes, colon, comma). */
function maxPropertiesPerRequest(valueMinSize: number): number {
  return Math.floor((MAX_REQUEST_SIZE_BYTES - 2) / (valueMinSize + 6));
}

const CEL_RESERVED = new Set(
  'true false null in as break const continue else for function if import let loop package namespace return var void while'.split(
    ' ',
  ),
);

/** A property name as CEL sees it (`__dash__` and friends), or undefined when it cannot be. */
export function escapeFieldName(name: string): string | undefined {
  if (name === '' || /^[0-9]/.test(name)) return undefined;
  if (CEL_RESERVED.has(name)) return `__${name}__`;
  if (!/^[A-Za-z0-9_.\-/]+$/.test(name)) return undefined;
  return name.replace(/__|[.\-/]/g, (m) =>
    m === '__' ? '__underscores__' : m === '.' ? '__dot__' : m === '-' ? '__dash__' : '__slash__',
  );
}

function stringDecl(s: SchemaNode): Decl {
  const perRequest = MAX_REQUEST_SIZE_BYTES - 2;
  switch (s.format) {
    case 'byte':
      return scalar('bytes', MIN_STRING_SIZE, s.maxLength ?? perRequest);
    case 'duration':
      return scalar('duration', MIN_DURATION_SIZE, MAX_DURATION_SIZE);
    case 'date':
      return scalar('timestamp', DATE_SIZE, DATE_SIZE);
    case 'date-time':
      return scalar('timestamp', MIN_DATETIME_SIZE, MAX_DATETIME_SIZE);
  }
  // maxLength counts code points; a code point is up to 4 bytes.
  if (s.maxLength !== undefined) return scalar('string', MIN_STRING_SIZE, s.maxLength * 4);
  if (s.enum && s.enum.length > 0) {
    const longest = Math.max(
      ...s.enum.map((v) => (typeof v === 'string' ? Buffer.byteLength(v) : 0)),
    );
    return scalar('string', MIN_STRING_SIZE, longest);
  }
  return scalar('string', MIN_STRING_SIZE, perRequest);
}

/** The root of a resource always exposes apiVersion, kind and metadata.name/generateName. */
function withTypeAndObjectMeta(s: SchemaNode): SchemaNode {
  const props = s.properties ?? {};
  const metaProps = props.metadata?.properties ?? {};
  const complete =
    props.kind?.type === 'string' &&
    props.apiVersion?.type === 'string' &&
    props.metadata?.type === 'object' &&
    metaProps.name?.type === 'string' &&
    metaProps.generateName?.type === 'string';
  if (complete) return s;
  return {
    ...s,
    properties: {
      ...props,
      kind: { type: 'string' },
      apiVersion: { type: 'string' },
      metadata: {
        type: 'object',
        properties: { name: { type: 'string' }, generateName: { type: 'string' } },
      },
    },
  };
}

function objectDecl(s: SchemaNode): Decl | undefined {
  const values = s.additionalProperties;
  if (values !== undefined && typeof values === 'object') {
    const valueDecl = declFromSchema(values, values['x-kubernetes-embedded-resource'] === true);
    if (!valueDecl) return undefined;
    const maxElements = s.maxProperties ?? maxPropertiesPerRequest(valueDecl.minSize);
    return { kind: 'map', minSize: 2, maxElements, key: MAP_KEY, elem: valueDecl };
  }
  const fields = new Map<string, Decl>();
  const required = new Set(s.required ?? []);
  let minSize = 2; // {}
  for (const [name, prop] of Object.entries(s.properties ?? {})) {
    const decl = declFromSchema(prop, prop['x-kubernetes-embedded-resource'] === true);
    if (!decl) continue;
    const escaped = escapeFieldName(name);
    if (escaped !== undefined) fields.set(escaped, decl);
    // Required fields without a default are in every serialization: "name":value,
    if (required.has(name) && prop.default === undefined) minSize += name.length + decl.minSize + 4;
  }
  return { kind: 'object', minSize, maxElements: 0, fields };
}

/**
 * The CEL declaration of a schema node, or undefined when CEL cannot see it (no
 * type, or a list/map of such). `resourceRoot`: the root of a custom resource or an
 * embedded resource.
 */
export function declFromSchema(s: SchemaNode, resourceRoot = false): Decl | undefined {
  if (s['x-kubernetes-int-or-string'] === true) {
    const maxElements = s.maxLength !== undefined ? s.maxLength * 4 : MAX_REQUEST_SIZE_BYTES - 2;
    return scalar('dyn', 1, maxElements);
  }
  const node = resourceRoot ? withTypeAndObjectMeta(s) : s;
  switch (node.type) {
    case 'array': {
      if (!node.items) return undefined;
      const items = declFromSchema(node.items, node.items['x-kubernetes-embedded-resource']);
      if (!items) return undefined;
      const maxElements = node.maxItems ?? maxItemsPerRequest(items.minSize);
      return { kind: 'list', minSize: 2, maxElements, elem: items };
    }
    case 'object':
      return objectDecl(node);
    case 'string':
      return stringDecl(node);
    case 'boolean':
      return scalar('bool', MIN_BOOL_SIZE);
    case 'number':
      return scalar('double', MIN_NUMBER_SIZE);
    case 'integer':
      return scalar('int', MIN_NUMBER_SIZE);
    default:
      return undefined;
  }
}
