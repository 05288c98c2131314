// Admission of hookgate resources outside a cluster: the same pruning, defaulting,
// schema and CEL checks the API server applies with our CRDs installed.
import { metadataProblems } from './metadata-rules.ts';
import { objectSchema } from './crd.ts';
import { admit, type FieldError, type OpenApiSchema } from './structural.ts';
import { OBJECT_META } from './structural-decode.ts';
import { API_VERSION, WEBHOOK_TRIGGER_KIND, WORKFLOW_KIND } from './v1alpha1/index.ts';

export type { FieldError } from './structural.ts';

const schemas = new Map<string, OpenApiSchema>();
function schemaFor(kind: string): OpenApiSchema {
  let schema = schemas.get(kind);
  if (!schema) {
    schema = objectSchema(kind);
    schemas.set(kind, schema);
  }
  return schema;
}

export const HOOKGATE_KINDS = [WORKFLOW_KIND, WEBHOOK_TRIGGER_KIND] as const;

export type AdmissionResult =
  | { ok: true; object: Record<string, unknown>; warnings: string[] }
  | { ok: false; errors: FieldError[] };

/**
 * Admit one hookgate object. Unknown fields are errors (kubectl's default strict
 * field validation), so a typo in a manifest is reported rather than ignored.
 */
export function admitResource(input: unknown): AdmissionResult {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return {
      ok: false,
      errors: [{ field: '', message: 'must be an object', reason: 'FieldValueInvalid' }],
    };
  }
  const obj = input as Record<string, unknown>;
  if (obj.apiVersion !== API_VERSION) {
    return {
      ok: false,
      errors: [
        {
          field: 'apiVersion',
          message: `Unsupported value: must be ${API_VERSION}`,
          reason: 'FieldValueNotSupported',
        },
      ],
    };
  }
  if (typeof obj.kind !== 'string' || !(HOOKGATE_KINDS as readonly string[]).includes(obj.kind)) {
    return {
      ok: false,
      errors: [
        {
          field: 'kind',
          message: `Unsupported value: supported values: ${HOOKGATE_KINDS.join(', ')}`,
          reason: 'FieldValueNotSupported',
        },
      ],
    };
  }
  // The status is the controller's (a status subresource); metadata stays, as rules on
  // the root may read metadata.name.
  const { status: _status, ...rest } = obj;
  const { value, unknownFields, errors, warnings } = admit(rest, schemaFor(obj.kind));
  const all: FieldError[] = [
    ...metadataErrors(obj.metadata),
    ...unknownFields.map((field) => ({
      field,
      message: 'unknown field',
      reason: 'FieldValueInvalid',
    })),
    ...errors,
  ];
  if (all.length > 0) return { ok: false, errors: all };
  return { ok: true, object: value as Record<string, unknown>, warnings };
}

/**
 * What strict decoding refuses in metadata before the schema is looked at: a
 * metadata that is not an object, or a field ObjectMeta does not have.
 */
function metadataErrors(metadata: unknown): FieldError[] {
  if (metadata === undefined) return [];
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) {
    return [{ field: 'metadata', message: 'must be an object', reason: 'FieldValueInvalid' }];
  }
  const unknown = Object.keys(metadata)
    .filter((key) => !OBJECT_META.has(key))
    .map((key) => ({
      field: `metadata.${key}`,
      message: 'unknown field',
      reason: 'FieldValueInvalid',
    }));
  const rules = metadataProblems(metadata as Record<string, unknown>).map((p) => ({
    ...p,
    reason: 'FieldValueInvalid',
  }));
  return [...unknown, ...rules];
}
