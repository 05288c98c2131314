// Building blocks shared by the hookgate.dev/v1alpha1 resources.
//
// Every schema here is the single source for three things: the static TypeScript
// type (Static<>), the ajv validator (validate.ts) and the CRD's OpenAPI schema
// (crd.ts). Every field carries a description so that `kubectl explain` is useful.
import {
  Type,
  type Static,
  type TLiteral,
  type TSchema,
  type TUnion,
  type SchemaOptions,
} from '@sinclair/typebox';
import { MAX_ITEMS } from './bounds.ts';

export const GROUP = 'hookgate.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

/** A CEL rule attached to a schema node, as `x-kubernetes-validations` wants it. */
export interface CelRule {
  rule: string;
  message: string;
  /** Relative JSONPath of the field the error is reported on, e.g. `.auth.apiKey`. */
  fieldPath?: string;
  reason?:
    'FieldValueInvalid' | 'FieldValueRequired' | 'FieldValueForbidden' | 'FieldValueDuplicate';
}

/** Attach CEL rules to a schema (kept as the vendor extension the CRD needs). */
export function withRules<T extends TSchema>(schema: T, rules: CelRule[]): T {
  return Object.assign(schema, { 'x-kubernetes-validations': rules });
}

/** A string enum (a union of literals), typed as the union of its values. */
export function literals<const T extends readonly string[]>(
  values: T,
  options: SchemaOptions = {},
): TUnion<{ -readonly [K in keyof T]: TLiteral<T[K]> }> {
  return Type.Union(
    values.map((v) => Type.Literal(v)),
    options,
  ) as unknown as TUnion<{ -readonly [K in keyof T]: TLiteral<T[K]> }>;
}

/** A duration such as `30s`, `5m` or `1h` (whole seconds, minutes or hours). */
export const DURATION_PATTERN = '^[1-9][0-9]{0,4}(s|m|h)$';
/** A short duration such as `250ms`, `2s` or `1m` (used inside workflows). */
export const SHORT_DURATION_PATTERN = '^[0-9]{1,6}(ms|s|m)$';

const DURATION_UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Milliseconds of a duration in either form above (`250ms`, `30s`, `5m`, `1h`); throws otherwise. */
export function parseDuration(value: string): number {
  const match = /^([0-9]{1,9})(ms|s|m|h)$/.exec(value.trim());
  if (!match) throw new Error(`invalid duration '${value}'`);
  return Number(match[1]) * (DURATION_UNIT_MS[match[2] as string] as number);
}

/** Reference to a Secret in the same namespace as the referring object. */
export const SecretKeyRef = Type.Object(
  {
    name: Type.String({
      minLength: 1,
      maxLength: 253,
      pattern: '^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$',
      description: 'Name of the Secret, in the same namespace as this resource.',
    }),
    key: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 253,
        description:
          'Key inside the Secret. When omitted, the meaning depends on the field (for API keys: every key of the Secret is a consumer id).',
      }),
    ),
  },
  {
    additionalProperties: false,
    description: 'Reference to a Secret (and optionally one key of it).',
  },
);
export type SecretKeyRef = Static<typeof SecretKeyRef>;

/** A status condition, keyed by `type` (metav1.Condition). */
/** Longest condition message the API server accepts (metav1.Condition's 32768). */
export const CONDITION_MESSAGE_MAX_LENGTH = 32768;

export const Condition = Type.Object(
  {
    type: Type.String({
      description: 'Type of condition in CamelCase, e.g. Ready.',
      maxLength: 316,
    }),
    status: Type.Union([Type.Literal('True'), Type.Literal('False'), Type.Literal('Unknown')], {
      description: 'Status of the condition: True, False or Unknown.',
    }),
    reason: Type.String({
      description: 'Machine-readable CamelCase reason for the last transition.',
      maxLength: 1024,
    }),
    message: Type.String({
      description: 'Human-readable message with details.',
      maxLength: CONDITION_MESSAGE_MAX_LENGTH,
    }),
    lastTransitionTime: Type.String({
      format: 'date-time',
      description: 'Last time the condition moved from one status to another.',
    }),
    observedGeneration: Type.Integer({
      minimum: 0,
      description: 'The metadata.generation this condition was computed from.',
    }),
  },
  { additionalProperties: false, description: 'One aspect of the current state of the resource.' },
);
export type Condition = Static<typeof Condition>;

export const Conditions = Type.Array(Condition, {
  maxItems: MAX_ITEMS.conditions,
  description: 'Current state of the resource, one entry per condition type.',
  'x-kubernetes-list-type': 'map',
  'x-kubernetes-list-map-keys': ['type'],
});

/** The part of ObjectMeta the resources rely on. Validated by the API server, not by us. */
export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  finalizers?: string[];
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

/** A resource as read from any resource source. */
export interface Resource<Spec, Status> {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec: Spec;
  status?: Status;
}
