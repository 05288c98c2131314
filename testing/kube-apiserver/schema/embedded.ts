// `x-kubernetes-embedded-resource: true`: the object is a whole Kubernetes object, so
// it needs `apiVersion` and `kind` (non-empty strings, the kind a DNS label in any
// case) and its metadata must be ObjectMeta (pruning already dropped unknown fields).
import { fe } from './errors.ts';
import { FieldPath, isObject, property, type FieldError, type OpenApiSchema } from './types.ts';

const DNS1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const GROUP_VERSION = /^([^/]+\/)?[^/]+$/;

export function validateEmbedded(value: unknown, schema: OpenApiSchema | undefined): FieldError[] {
  const out: FieldError[] = [];
  walk(value, schema, FieldPath.root, out);
  return out;
}

function walk(x: unknown, s: OpenApiSchema | undefined, path: FieldPath, out: FieldError[]): void {
  if (!s) return;
  if (Array.isArray(x)) {
    x.forEach((item, i) => walk(item, s.items, path.index(i), out));
    return;
  }
  if (!isObject(x)) return;
  if (s['x-kubernetes-embedded-resource'] && path.toString() !== '<nil>') check(x, path, out);
  for (const [k, v] of Object.entries(x)) {
    const prop = property(s, k);
    if (prop) walk(v, prop, path.child(k), out);
    else if (isObject(s.additionalProperties)) walk(v, s.additionalProperties, path.key(k), out);
  }
}

function check(x: Record<string, unknown>, path: FieldPath, out: FieldError[]): void {
  for (const k of ['apiVersion', 'kind']) {
    const v = x[k];
    const at = path.child(k);
    if (!Object.hasOwn(x, k)) out.push(fe.required(at));
    else if (typeof v !== 'string') out.push(fe.invalid(at, v, 'must be a string'));
    else if (v === '') out.push(fe.invalid(at, v, 'must not be empty'));
    else if (k === 'apiVersion' && !GROUP_VERSION.test(v)) {
      out.push(fe.invalid(at, v, `unexpected GroupVersion string: ${v}`));
    } else if (k === 'kind' && (v.length > 63 || !DNS1035.test(v.toLowerCase()))) {
      out.push(
        fe.invalid(
          at,
          v,
          "may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        ),
      );
    }
  }
  const meta = x.metadata;
  if (meta !== undefined && !isObject(meta)) {
    out.push(fe.invalid(path.child('metadata'), meta, 'must be an object'));
  }
}
