// What happens to an object between the request body and storage: metadata rules
// (K6), structural pruning/defaulting/validation/CEL through the server's own schema/
// modules (K19-K21), the CEL cost budget of CRDs (crd-cost.ts), generation (K8, K9), and the
// special cases of built-ins (CRD status, Secret stringData, Namespace phase).
import { crdRuleErrors, crdSchemaErrors, decode, validateObject } from './schema/index.ts';
import { crdCostErrors } from './crd-cost.ts';
import { objectMetaCauses } from './object-meta.ts';
import { canonical } from './patch.ts';
import { apiVersionOf, type CrdSpec, type KubeObject, type ResourceType } from './resources.ts';
import { badRequest, invalid } from './status.ts';
import { OBJECT_META_FIELDS } from './schema/prune.ts';

export type FieldValidation = 'Strict' | 'Warn' | 'Ignore';

const SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** apiVersion and kind first, as the API server serialises them. */
export function withType(obj: KubeObject, rt: ResourceType): KubeObject {
  const { apiVersion: _a, kind: _k, metadata, ...rest } = obj;
  return { apiVersion: apiVersionOf(rt), kind: rt.kind, metadata, ...rest };
}

/** Everything of an object except metadata (and, with a status subresource, status). */
export function specPart(obj: KubeObject, ignoreStatus: boolean): string {
  const { metadata: _m, apiVersion: _a, kind: _k, status, ...rest } = obj;
  return canonical(ignoreStatus ? rest : { ...rest, status });
}

/** RBAC objects' names are path segments (ValidateRBACName = path.IsValidPathSegmentName). */
function pathSegmentNameError(name: string): string | undefined {
  if (name === '.' || name === '..') return `may not be '${name}'`;
  for (const c of ['/', '%']) if (name.includes(c)) return `may not contain '${c}'`;
  return undefined;
}

export function checkName(rt: ResourceType, name: string): void {
  if (rt.group === 'rbac.authorization.k8s.io') {
    const error = pathSegmentNameError(name);
    if (error) {
      throw invalid(rt, name, [
        {
          field: 'metadata.name',
          reason: 'FieldValueInvalid',
          message: `Invalid value: ${JSON.stringify(name)}: ${error}`,
        },
      ]);
    }
    return;
  }
  if (name.length > 253 || !SUBDOMAIN.test(name)) {
    throw invalid(rt, name, [
      {
        field: 'metadata.name',
        reason: 'FieldValueInvalid',
        message:
          `Invalid value: "${name}": a lowercase RFC 1123 subdomain must consist of lower case ` +
          `alphanumeric characters, '-' or '.', and must start and end with an alphanumeric ` +
          `character (e.g. 'example.com', regex used for validation is ` +
          `'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
      },
    ]);
  }
}

export interface Admitted {
  object: KubeObject;
  warnings: string[];
}

/**
 * Prune unknown fields (K19), default (K20), validate the schema and CEL rules (K20,
 * K21; `old` enables transition rules and ratcheting). Metadata is checked against
 * ObjectMeta's field list.
 */
export function admitObject(
  rt: ResourceType,
  input: KubeObject,
  fieldValidation: FieldValidation,
  old?: KubeObject,
): Admitted {
  const { metadata, ...rest } = structuredClone(input);
  const unknown = Object.keys(metadata)
    .filter((k) => !OBJECT_META_FIELDS.has(k))
    .map((k) => `metadata.${k}`);
  for (const f of unknown) delete metadata[f.slice('metadata.'.length)];
  delete metadata.managedFields;
  delete metadata.selfLink;
  const schema = rt.schema;
  if (schema) unknown.push(...decode(rest, schema));
  if (unknown.length > 0 && fieldValidation === 'Strict') {
    throw badRequest(
      `strict decoding error: ${unknown.map((f) => `unknown field "${f}"`).join(', ')}`,
    );
  }
  const warnings = fieldValidation === 'Ignore' ? [] : unknown.map((f) => `unknown field "${f}"`);
  // ObjectMeta's rules first, then the schema's, in one 422 as the strategies report them.
  const errors = objectMetaCauses(metadata);
  if (schema) {
    const verdict = validateObject({ ...rest, metadata }, schema, old);
    errors.push(...verdict.errors);
    warnings.push(...verdict.warnings);
  }
  if (errors.length > 0) throw invalid(rt, metadata.name ?? '', errors);
  if (rt.kind === 'CustomResourceDefinition') checkCrd(rt, { metadata, ...rest });
  return { object: withType({ metadata, ...rest }, rt), warnings };
}

// ---------------------------------------------------------------- built-ins

/** A CRD must be named plural.group, have names and versions, and rules that compile (K21). */
function checkCrd(rt: ResourceType, crd: KubeObject): void {
  const spec = crd.spec as Partial<CrdSpec> | undefined;
  const errors: { field: string; message: string; reason: string }[] = [];
  const name = crd.metadata.name ?? '';
  if (!spec?.group || !spec.names?.plural || !spec.names.kind) {
    errors.push({
      field: 'spec',
      reason: 'FieldValueRequired',
      message: 'Required value: group, names.plural and names.kind',
    });
  } else if (name !== `${spec.names.plural}.${spec.group}`) {
    errors.push({
      field: 'metadata.name',
      reason: 'FieldValueInvalid',
      message: `Invalid value: "${name}": must be spec.names.plural+"."+spec.group`,
    });
  }
  if (!Array.isArray(spec?.versions) || spec.versions.length === 0) {
    errors.push({
      field: 'spec.versions',
      reason: 'FieldValueRequired',
      message: 'Required value: must have exactly one version marked as storage version',
    });
  }
  if (Array.isArray(spec?.versions)) {
    // Schemas must be structural (reported at spec.validation when all versions share
    // one schema, as the API server's internal form has it). Rules are compiled and
    // priced only on a schema without such errors, as validation.go does (it skips CEL
    // below a node with schema errors; here, anywhere in a CRD that has any).
    const schemaErrors = crdSchemaErrors(spec.versions);
    errors.push(...schemaErrors);
    if (schemaErrors.length === 0) {
      // Rules must compile against their schema.
      errors.push(...crdRuleErrors(spec.versions));
      // The CEL cost budget (estimated from the schema's size bounds), as a real server checks it.
      errors.push(...crdCostErrors(spec));
    }
  }
  if (errors.length > 0) throw invalid(rt, name, errors);
}

/** Server-maintained status of a CRD: names accepted, established (K27). */
export function crdStatus(crd: KubeObject, now: string): Record<string, unknown> {
  const spec = crd.spec as CrdSpec;
  const condition = (type: string, reason: string, message: string): Record<string, unknown> => ({
    type,
    status: 'True',
    lastTransitionTime: now,
    reason,
    message,
  });
  const storage = spec.versions.find((v) => v.storage) ?? spec.versions[0];
  return {
    conditions: [
      condition('NamesAccepted', 'NoConflicts', 'no conflicts found'),
      condition('Established', 'InitialNamesAccepted', 'the initial names have been accepted'),
    ],
    acceptedNames: {
      ...spec.names,
      singular: spec.names.singular ?? spec.names.kind.toLowerCase(),
      listKind: spec.names.listKind ?? `${spec.names.kind}List`,
    },
    storedVersions: storage ? [storage.name] : [],
  };
}

/** Secrets: stringData is write-only and lands base64-encoded in data. */
export function normaliseBuiltin(rt: ResourceType, obj: KubeObject): void {
  if (rt.group === '' && rt.kind === 'Secret') {
    const stringData = obj.stringData;
    if (isObject(stringData)) {
      const data = isObject(obj.data) ? obj.data : {};
      for (const [k, v] of Object.entries(stringData)) {
        data[k] = Buffer.from(String(v)).toString('base64');
      }
      obj.data = data;
    }
    delete obj.stringData;
    obj.type ??= 'Opaque';
  }
  if (rt.group === '' && rt.kind === 'Namespace') obj.status = { phase: 'Active' };
}
