// Patch formats of custom resources (K22): RFC 6902 JSON Patch, RFC 7386 JSON Merge
// Patch, and a simplified server-side apply merge. Strategic merge patch is refused
// with 415 by the caller.
import { badRequest, unprocessable } from './status.ts';
import type { OpenApiSchema } from './schema/types.ts';

type Json = unknown;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// ---------------------------------------------------------------- JSON Patch

interface Op {
  op: string;
  path: string;
  from?: string;
  value?: Json;
}

function pointer(path: string): string[] {
  if (path === '') return [];
  if (!path.startsWith('/')) throw unprocessable(`invalid JSON pointer: ${path}`);
  return path
    .slice(1)
    .split('/')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function parentOf(doc: Json, parts: string[], path: string): { parent: Json; key: string } {
  let cur = doc;
  for (const part of parts.slice(0, -1)) {
    cur = child(cur, part, path);
  }
  return { parent: cur, key: parts[parts.length - 1] ?? '' };
}

function child(cur: Json, part: string, path: string): Json {
  if (Array.isArray(cur)) {
    const i = Number(part);
    if (!/^\d+$/.test(part) || i >= cur.length) throw missing(path);
    return cur[i];
  }
  if (isObject(cur) && part in cur) return cur[part];
  throw missing(path);
}

function missing(path: string): Error {
  return unprocessable(`doc is missing path: "${path}": missing value`);
}

function getAt(doc: Json, path: string): Json {
  let cur = doc;
  for (const part of pointer(path)) cur = child(cur, part, path);
  return cur;
}

function addAt(doc: Json, path: string, value: Json): Json {
  const parts = pointer(path);
  if (parts.length === 0) return value;
  const { parent, key } = parentOf(doc, parts, path);
  if (Array.isArray(parent)) {
    const i = key === '-' ? parent.length : Number(key);
    if (!/^\d+$|^-$/.test(key) || i > parent.length) throw missing(path);
    parent.splice(i, 0, value);
  } else if (isObject(parent)) parent[key] = value;
  else throw missing(path);
  return doc;
}

function removeAt(doc: Json, path: string): Json {
  const parts = pointer(path);
  const { parent, key } = parentOf(doc, parts, path);
  child(parent, key, path);
  if (Array.isArray(parent)) parent.splice(Number(key), 1);
  else delete (parent as Record<string, unknown>)[key];
  return doc;
}

function applyOp(doc: Json, op: Op): Json {
  switch (op.op) {
    case 'add':
      return addAt(doc, op.path, structuredClone(op.value));
    case 'remove':
      return removeAt(doc, op.path);
    case 'replace':
      return addAt(removeAt(doc, op.path), op.path, structuredClone(op.value));
    case 'move': {
      const value = getAt(doc, op.from ?? '');
      return addAt(removeAt(doc, op.from ?? ''), op.path, value);
    }
    case 'copy':
      return addAt(doc, op.path, structuredClone(getAt(doc, op.from ?? '')));
    case 'test':
      if (canonical(getAt(doc, op.path)) !== canonical(op.value)) {
        throw unprocessable(`testing value ${op.path} failed: test failed`);
      }
      return doc;
    default:
      throw badRequest(`unexpected kind: ${op.op}`);
  }
}

/** Apply an RFC 6902 patch. An object-shaped body is a 400, as in Go's decoder (K23). */
export function jsonPatch(target: Json, body: Json): Json {
  if (!Array.isArray(body)) {
    throw badRequest('json: cannot unmarshal object into Go value of type jsonpatch.Patch');
  }
  let doc = structuredClone(target);
  for (const op of body) {
    if (!isObject(op) || typeof op.op !== 'string' || typeof op.path !== 'string') {
      throw badRequest(`invalid JSON patch operation: ${JSON.stringify(op)}`);
    }
    doc = applyOp(doc, op as unknown as Op);
  }
  return doc;
}

// ---------------------------------------------------------------- merge patch

/** RFC 7386: objects merge, null deletes, everything else (arrays too) replaces. */
export function mergePatch(target: Json, patch: Json): Json {
  if (!isObject(patch)) return structuredClone(patch);
  const out: Record<string, unknown> = isObject(target) ? structuredClone(target) : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

// ---------------------------------------------------------------- apply

/**
 * Simplified server-side apply: the applied configuration is merged into the live
 * object. Objects merge recursively, `x-kubernetes-list-type: map` lists merge by
 * their keys, other lists and scalars are replaced. Field ownership is not tracked,
 * so fields a manager stops applying are not removed (documented in README.md).
 */
export function applyMerge(live: Json, applied: Json, schema?: OpenApiSchema): Json {
  if (isObject(applied)) {
    const out: Record<string, unknown> = isObject(live) ? structuredClone(live) : {};
    for (const [k, v] of Object.entries(applied)) {
      const sub = schema?.properties?.[k] ?? additional(schema);
      out[k] = v === null ? null : applyMerge(out[k], v, sub);
    }
    return out;
  }
  if (
    Array.isArray(applied) &&
    Array.isArray(live) &&
    schema?.['x-kubernetes-list-type'] === 'map'
  ) {
    const keys = schema['x-kubernetes-list-map-keys'] ?? [];
    const id = (item: unknown): string =>
      JSON.stringify(keys.map((key) => (isObject(item) ? item[key] : undefined)));
    const out = structuredClone(live);
    for (const item of applied) {
      const i = out.findIndex((o) => id(o) === id(item));
      if (i >= 0) out[i] = applyMerge(out[i], item, schema.items);
      else out.push(structuredClone(item));
    }
    return out;
  }
  return structuredClone(applied);
}

function additional(schema?: OpenApiSchema): OpenApiSchema | undefined {
  return isObject(schema?.additionalProperties) ? schema.additionalProperties : undefined;
}

/** JSON with object keys sorted: two values are byte-identical when these match (K5). */
export function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    isObject(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v,
  );
}
