// Turns the TypeBox schemas of operator/api/v1alpha1 into CustomResourceDefinitions.
//
// TypeBox emits JSON Schema; a CRD wants a structural OpenAPI v3 subset. The
// conversion is mechanical: unions of literals become `enum`, records become
// `additionalProperties`, `additionalProperties: false` is dropped (pruning and
// strict field validation take its place), `unknown` keeps unknown fields.
import type { TSchema } from '@sinclair/typebox';
import {
  GROUP,
  VERSION,
  WEBHOOK_TRIGGER_KIND,
  WEBHOOK_TRIGGER_PLURAL,
  WORKFLOW_KIND,
  WORKFLOW_PLURAL,
  WebhookTriggerSpec,
  WebhookTriggerStatus,
  WorkflowSpec,
  WorkflowStatus,
} from './v1alpha1/index.ts';
import type { OpenApiSchema } from './structural.ts';

/** Convert one TypeBox schema to the structural OpenAPI form a CRD accepts. */
export function toOpenApi(schema: TSchema | Record<string, unknown>): OpenApiSchema {
  const s = JSON.parse(JSON.stringify(schema)) as Record<string, unknown>;
  return convert(s);
}

function convert(s: Record<string, unknown>): OpenApiSchema {
  const out: OpenApiSchema = {};
  const anyOf = s.anyOf as Record<string, unknown>[] | undefined;
  if (anyOf && anyOf.every((m) => 'const' in m)) {
    out.type = typeof anyOf[0]?.const === 'number' ? 'integer' : 'string';
    out.enum = anyOf.map((m) => m.const);
  }
  for (const [key, value] of Object.entries(s)) {
    switch (key) {
      case 'anyOf':
      case 'additionalProperties':
      case '$id':
        break;
      case 'properties':
        out.properties = Object.fromEntries(
          Object.entries(value as Record<string, Record<string, unknown>>).map(([k, v]) => [
            k,
            convert(v),
          ]),
        );
        break;
      case 'patternProperties': {
        const [inner] = Object.values(value as Record<string, Record<string, unknown>>);
        out.type = 'object';
        if (inner) out.additionalProperties = convert(inner);
        break;
      }
      case 'items':
        out.items = convert(value as Record<string, unknown>);
        break;
      case 'required':
        if ((value as string[]).length > 0) out.required = value as string[];
        break;
      default:
        out[key] = value;
    }
  }
  if (s.additionalProperties && typeof s.additionalProperties === 'object') {
    out.additionalProperties = convert(s.additionalProperties as Record<string, unknown>);
  }
  if (out['x-kubernetes-preserve-unknown-fields'] === true && !out.type) {
    // An untyped field: any JSON value. The API server allows this shape only with
    // preserve-unknown-fields, which we set.
  }
  return out;
}

interface PrinterColumn {
  name: string;
  type: string;
  jsonPath: string;
  description: string;
  priority?: number;
}

const readyColumns: PrinterColumn[] = [
  {
    name: 'Ready',
    type: 'string',
    jsonPath: '.status.conditions[?(@.type=="Ready")].status',
    description: 'Whether the resource is fully reconciled.',
  },
  {
    name: 'Status',
    type: 'string',
    jsonPath: '.status.conditions[?(@.type=="Ready")].message',
    description: 'The Ready condition message.',
  },
];
const ageColumn: PrinterColumn = {
  name: 'Age',
  type: 'date',
  jsonPath: '.metadata.creationTimestamp',
  description: 'Time since the resource was created.',
};

interface KindInfo {
  kind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  description: string;
  spec: TSchema;
  status: TSchema;
  columns: PrinterColumn[];
}

const kinds: KindInfo[] = [
  {
    kind: WORKFLOW_KIND,
    plural: WORKFLOW_PLURAL,
    singular: 'workflow',
    shortNames: ['wf', 'hgwf'],
    description: 'A Workflow declares what runs when one of its WebhookTriggers accepts a request.',
    spec: WorkflowSpec,
    status: WorkflowStatus,
    columns: [
      ...readyColumns,
      {
        name: 'Workflow ID',
        type: 'string',
        jsonPath: '.status.workflowId',
        description: 'Workflow identifier.',
      },
      {
        name: 'Environment',
        type: 'string',
        jsonPath: '.spec.environment',
        description: 'Environment.',
        priority: 1,
      },
      ageColumn,
    ],
  },
  {
    kind: WEBHOOK_TRIGGER_KIND,
    plural: WEBHOOK_TRIGGER_PLURAL,
    singular: 'webhooktrigger',
    shortNames: ['wht', 'hook'],
    description:
      'A WebhookTrigger publishes an HTTP endpoint; every accepted request starts one execution of its Workflow.',
    spec: WebhookTriggerSpec,
    status: WebhookTriggerStatus,
    columns: [
      ...readyColumns,
      {
        name: 'URL',
        type: 'string',
        jsonPath: '.status.url',
        description: 'Generated webhook URL.',
      },
      {
        name: 'Mode',
        type: 'string',
        jsonPath: '.spec.response.mode',
        description: 'Response mode.',
        priority: 1,
      },
      ageColumn,
    ],
  },
];

/** The CRDs as plain objects, ready to serialize. */
export function buildCrds(): Record<string, unknown>[] {
  return kinds.map((k) => ({
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${k.plural}.${GROUP}`,
      labels: { 'app.kubernetes.io/name': 'hookgate', 'app.kubernetes.io/part-of': 'hookgate' },
    },
    spec: {
      group: GROUP,
      scope: 'Namespaced',
      names: {
        kind: k.kind,
        listKind: `${k.kind}List`,
        plural: k.plural,
        singular: k.singular,
        shortNames: k.shortNames,
        categories: ['hookgate'],
      },
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: k.columns,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description: k.description,
              required: ['spec'],
              properties: {
                apiVersion: {
                  type: 'string',
                  description: 'APIVersion of this object: hookgate.dev/v1alpha1.',
                },
                kind: { type: 'string', description: `Kind of this object: ${k.kind}.` },
                metadata: { type: 'object' },
                spec: toOpenApi(k.spec),
                status: toOpenApi(k.status),
              },
            },
          },
        },
      ],
    },
  }));
}

/** The structural schema of one kind's whole object (used by the embedded validator). */
export function objectSchema(kind: string): OpenApiSchema {
  const crd = buildCrds().find((c) => (c.spec as { names: { kind: string } }).names.kind === kind);
  if (!crd) throw new Error(`unknown kind ${kind}`);
  const versions = (crd.spec as { versions: { schema: { openAPIV3Schema: OpenApiSchema } }[] })
    .versions;
  return versions[0]!.schema.openAPIV3Schema;
}
