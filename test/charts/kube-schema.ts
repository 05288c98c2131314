// Validates rendered Kubernetes objects against the Kubernetes 1.36 API, offline (no API
// server runs here):
//
// - kubernetes-models 5.1 (generated from the Kubernetes v1.36.0 OpenAPI spec): types,
//   required fields, formats and enums, through each kind's model `validate()`;
// - the attribute maps of @kubernetes/client-node 2.0 (generated from release-1.36):
//   unknown fields, which the OpenAPI schemas allow but the API server drops with a
//   warning and `kubectl apply --validate=strict` refuses (a mis-indented line in a
//   template shows up here and nowhere else);
// - object names and label values as the API server checks them;
// - ServiceMonitor (a prometheus-operator CRD, not in either package): a closed schema of
//   the fields the chart uses, shaped after monitoring.coreos.com/v1. The KEDA
//   ScaledObject (worker.autoscaling) likewise, after keda.sh/v1alpha1.
import * as k8s from '@kubernetes/client-node';
import { Ajv } from 'ajv';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinition';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ClusterRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole';
import { ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';

/** The Kubernetes version both packages were generated from. */
export const KUBERNETES_VERSION = '1.36';

interface Validatable {
  validate(): void;
}
type ModelClass = new (data: never) => Validatable;

interface Kind {
  model: ModelClass;
  /** The client-node class describing the fields (e.g. V1Deployment). */
  fields: string;
  namespaced: boolean;
  /** Services need a DNS-1035 label; most other kinds a DNS-1123 subdomain. */
  name: 'label' | 'subdomain';
}

/** Every kind the chart may render, by `apiVersion/kind`. A new kind must be added here. */
const KINDS: Record<string, Kind> = {
  'v1/ConfigMap': { model: ConfigMap, fields: 'V1ConfigMap', namespaced: true, name: 'subdomain' },
  'v1/Secret': { model: Secret, fields: 'V1Secret', namespaced: true, name: 'subdomain' },
  'v1/Service': { model: Service, fields: 'V1Service', namespaced: true, name: 'label' },
  'v1/ServiceAccount': {
    model: ServiceAccount,
    fields: 'V1ServiceAccount',
    namespaced: true,
    name: 'subdomain',
  },
  'apps/v1/Deployment': {
    model: Deployment,
    fields: 'V1Deployment',
    namespaced: true,
    name: 'subdomain',
  },
  'apps/v1/StatefulSet': {
    model: StatefulSet,
    fields: 'V1StatefulSet',
    namespaced: true,
    // Its pods' hostnames and the controller-revision-hash label derive from the name.
    name: 'label',
  },
  'policy/v1/PodDisruptionBudget': {
    model: PodDisruptionBudget,
    fields: 'V1PodDisruptionBudget',
    namespaced: true,
    name: 'subdomain',
  },
  'networking.k8s.io/v1/Ingress': {
    model: Ingress,
    fields: 'V1Ingress',
    namespaced: true,
    name: 'subdomain',
  },
  'networking.k8s.io/v1/NetworkPolicy': {
    model: NetworkPolicy,
    fields: 'V1NetworkPolicy',
    namespaced: true,
    name: 'subdomain',
  },
  'rbac.authorization.k8s.io/v1/ClusterRole': {
    model: ClusterRole,
    fields: 'V1ClusterRole',
    namespaced: false,
    name: 'subdomain',
  },
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': {
    model: ClusterRoleBinding,
    fields: 'V1ClusterRoleBinding',
    namespaced: false,
    name: 'subdomain',
  },
  'rbac.authorization.k8s.io/v1/Role': {
    model: Role,
    fields: 'V1Role',
    namespaced: true,
    name: 'subdomain',
  },
  'rbac.authorization.k8s.io/v1/RoleBinding': {
    model: RoleBinding,
    fields: 'V1RoleBinding',
    namespaced: true,
    name: 'subdomain',
  },
  'apiextensions.k8s.io/v1/CustomResourceDefinition': {
    model: CustomResourceDefinition,
    fields: 'V1CustomResourceDefinition',
    namespaced: false,
    name: 'subdomain',
  },
};

export interface RenderedObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [key: string]: unknown;
}

const DNS_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** Every problem with the object, as `<kind>/<name>: <path>: <message>` (empty when valid). */
export function validateObject(object: RenderedObject): string[] {
  const id = `${object.kind}/${object.metadata.name}`;
  const problems = [...metadataProblems(object)];
  if (object.apiVersion === 'monitoring.coreos.com/v1' && object.kind === 'ServiceMonitor') {
    problems.push(...serviceMonitorProblems(object));
    return problems.map((p) => `${id}: ${p}`);
  }
  if (object.apiVersion === 'keda.sh/v1alpha1' && object.kind === 'ScaledObject') {
    problems.push(...scaledObjectProblems(object));
    return problems.map((p) => `${id}: ${p}`);
  }
  const kind = KINDS[`${object.apiVersion}/${object.kind}`];
  if (!kind) return [`${id}: ${object.apiVersion} ${object.kind} is not a kind this check knows`];
  if (kind.namespaced !== (object.metadata.namespace !== undefined)) {
    problems.push(
      `metadata.namespace: ${kind.namespaced ? 'missing' : 'set on a cluster-scoped kind'}`,
    );
  }
  if (kind.name === 'label' ? !isLabel(object.metadata.name) : !isSubdomain(object.metadata.name)) {
    problems.push(`metadata.name: "${object.metadata.name}" is not a DNS-1123 ${kind.name}`);
  }
  problems.push(...schemaProblems(kind.model, object));
  unknownFields(object, kind.fields, '', problems);
  return problems.map((p) => `${id}: ${p}`);
}

function isLabel(name: string): boolean {
  return name.length <= 63 && DNS_LABEL.test(name);
}

function isSubdomain(name: string): boolean {
  return name.length <= 253 && DNS_SUBDOMAIN.test(name);
}

function metadataProblems(object: RenderedObject): string[] {
  const problems: string[] = [];
  for (const [key, value] of Object.entries(object.metadata.labels ?? {})) {
    if (typeof value !== 'string' || value.length > 63 || !LABEL_VALUE.test(value)) {
      problems.push(`metadata.labels.${key}: "${String(value)}" is not a valid label value`);
    }
  }
  return problems;
}

interface SchemaError {
  instancePath?: string;
  message?: string;
}

function schemaProblems(model: ModelClass, object: RenderedObject): string[] {
  try {
    new model(object as never).validate();
    return [];
  } catch (err) {
    const errors = (err as { errors?: SchemaError[] }).errors;
    if (!errors || errors.length === 0) return [String(err)];
    return errors.map((e) => `${e.instancePath || '/'}: ${e.message ?? 'invalid'}`);
  }
}

interface Attribute {
  baseName: string;
  type: string;
}
interface Described {
  getAttributeTypeMap(): Attribute[];
}

const PRIMITIVES = new Set(['string', 'number', 'boolean', 'Date', 'any', 'object', 'IntOrString']);

function described(type: string): Described {
  const candidate = (k8s as unknown as Record<string, unknown>)[type];
  if (typeof candidate !== 'function' || !('getAttributeTypeMap' in candidate)) {
    throw new Error(`@kubernetes/client-node has no model ${type}`);
  }
  return candidate as unknown as Described;
}

/** Reports every field that the type `type` (a client-node type expression) does not have. */
function unknownFields(value: unknown, type: string, path: string, problems: string[]): void {
  if (value === null || value === undefined || PRIMITIVES.has(type)) return;
  const array = /^Array<(.+)>$/.exec(type);
  if (array) {
    if (Array.isArray(value)) {
      value.forEach((item, i) =>
        unknownFields(item, array[1] as string, `${path}[${i}]`, problems),
      );
    }
    return;
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) {
    if (typeof value === 'object') {
      for (const [key, item] of Object.entries(value)) {
        unknownFields(item, map[1] as string, `${path}.${key}`, problems);
      }
    }
    return;
  }
  if (typeof value !== 'object' || Array.isArray(value)) return; // a type error, reported above
  const attributes = new Map(
    described(type)
      .getAttributeTypeMap()
      .map((a) => [a.baseName, a]),
  );
  for (const [key, item] of Object.entries(value)) {
    const attribute = attributes.get(key);
    const at = path ? `${path}.${key}` : key;
    if (!attribute) {
      problems.push(`${at}: unknown field (not in ${type})`);
      continue;
    }
    unknownFields(item, attribute.type, at, problems);
  }
}

// monitoring.coreos.com/v1 ServiceMonitor, the fields the chart renders (closed, so a typo
// fails); the duration pattern is the CRD's own.
const DURATION = {
  type: 'string',
  pattern:
    '^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$',
};
const STRINGS = { type: 'array', items: { type: 'string' } };
const SERVICE_MONITOR_SCHEMA = {
  type: 'object',
  required: ['apiVersion', 'kind', 'metadata', 'spec'],
  additionalProperties: false,
  properties: {
    apiVersion: { const: 'monitoring.coreos.com/v1' },
    kind: { const: 'ServiceMonitor' },
    metadata: { type: 'object', required: ['name', 'namespace'] },
    spec: {
      type: 'object',
      required: ['selector', 'endpoints'],
      additionalProperties: false,
      properties: {
        selector: {
          type: 'object',
          additionalProperties: false,
          properties: {
            matchLabels: { type: 'object', additionalProperties: { type: 'string' } },
          },
        },
        namespaceSelector: {
          type: 'object',
          additionalProperties: false,
          properties: { any: { type: 'boolean' }, matchNames: STRINGS },
        },
        podTargetLabels: STRINGS,
        targetLabels: STRINGS,
        jobLabel: { type: 'string' },
        endpoints: {
          type: 'array',
          minItems: 1,
          items: {
            type: 'object',
            additionalProperties: false,
            properties: {
              port: { type: 'string', minLength: 1 },
              path: { type: 'string', pattern: '^/' },
              scheme: { enum: ['http', 'https'] },
              interval: DURATION,
              scrapeTimeout: DURATION,
              honorLabels: { type: 'boolean' },
            },
          },
        },
      },
    },
  },
} as const;
/**
 * The problems of a custom resource the chart renders (not a Kubernetes model): its
 * closed JSON Schema, a DNS-1123 name and ObjectMeta's fields.
 */
function customResourceChecker(schema: object): (object: RenderedObject) => string[] {
  const validate = new Ajv({ allErrors: true, strict: false }).compile(schema);
  return (object) => {
    const problems: string[] = [];
    if (!validate(object)) {
      for (const e of validate.errors ?? []) {
        problems.push(
          `${e.instancePath || '/'}: ${e.message ?? 'invalid'} ${JSON.stringify(e.params)}`,
        );
      }
    }
    if (!isSubdomain(object.metadata.name)) {
      problems.push(`metadata.name: "${object.metadata.name}" is not a DNS-1123 subdomain`);
    }
    unknownFields(object.metadata, 'V1ObjectMeta', 'metadata', problems);
    return problems;
  };
}

const serviceMonitorProblems = customResourceChecker(SERVICE_MONITOR_SCHEMA);

// keda.sh/v1alpha1 ScaledObject (KEDA 2.x), the fields the chart renders, closed; the
// prometheus trigger's metadata keys are the scaler's documented ones (all strings).
const SCALED_OBJECT_SCHEMA = {
  type: 'object',
  required: ['apiVersion', 'kind', 'metadata', 'spec'],
  additionalProperties: false,
  properties: {
    apiVersion: { const: 'keda.sh/v1alpha1' },
    kind: { const: 'ScaledObject' },
    metadata: { type: 'object', required: ['name', 'namespace'] },
    spec: {
      type: 'object',
      required: ['scaleTargetRef', 'triggers'],
      additionalProperties: false,
      properties: {
        scaleTargetRef: {
          type: 'object',
          required: ['name'],
          additionalProperties: false,
          properties: {
            apiVersion: { type: 'string' },
            kind: { type: 'string' },
            name: { type: 'string', minLength: 1 },
          },
        },
        pollingInterval: { type: 'integer', minimum: 1 },
        cooldownPeriod: { type: 'integer', minimum: 0 },
        minReplicaCount: { type: 'integer', minimum: 0 },
        maxReplicaCount: { type: 'integer', minimum: 1 },
        triggers: {
          type: 'array',
          minItems: 1,
          items: {
            type: 'object',
            required: ['type', 'metadata'],
            additionalProperties: false,
            properties: {
              type: { const: 'prometheus' },
              name: { type: 'string', pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' },
              metricType: { enum: ['AverageValue', 'Value', 'Utilization'] },
              authenticationRef: {
                type: 'object',
                required: ['name'],
                additionalProperties: false,
                properties: { name: { type: 'string', minLength: 1 }, kind: { type: 'string' } },
              },
              metadata: {
                type: 'object',
                required: ['serverAddress', 'query', 'threshold'],
                additionalProperties: false,
                properties: {
                  serverAddress: { type: 'string', pattern: '^https?://' },
                  query: { type: 'string', minLength: 1 },
                  threshold: { type: 'string', pattern: '^[0-9]+(\\.[0-9]+)?$' },
                  activationThreshold: { type: 'string', pattern: '^[0-9]+(\\.[0-9]+)?$' },
                  ignoreNullValues: { enum: ['true', 'false'] },
                },
              },
            },
          },
        },
      },
    },
  },
} as const;
const scaledObjectProblems = customResourceChecker(SCALED_OBJECT_SCHEMA);
