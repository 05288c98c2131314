// The resource types the server serves: built-ins (namespaces, secrets, configmaps,
// service accounts, events, leases, RBAC, CRDs) and one type per served version of each CustomResourceDefinition.
import type { OpenApiSchema } from './schema/types.ts';

export interface PrinterColumn {
  name: string;
  type: string;
  jsonPath: string;
  description?: string;
  format?: string;
  priority?: number;
}

export interface ResourceType {
  group: string;
  version: string;
  plural: string;
  singular: string;
  kind: string;
  listKind: string;
  namespaced: boolean;
  shortNames: string[];
  categories: string[];
  statusSubresource: boolean;
  /** Custom-resource semantics: no unconditional update, no strategic merge patch. */
  custom: boolean;
  /** The structural schema of a CR version (undefined: anything goes). */
  schema?: OpenApiSchema;
  printerColumns: PrinterColumn[];
  selectableFields: string[];
  /** Whether metadata.generation is maintained. */
  generation: boolean;
}

/** One JSON object as stored: always has metadata. */
export type KubeObject = Record<string, unknown> & { metadata: ObjectMeta };

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: unknown[];
  [key: string]: unknown;
}

export const VERBS = ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'];

export function apiVersionOf(rt: { group: string; version: string }): string {
  return rt.group ? `${rt.group}/${rt.version}` : rt.version;
}

/** Storage is shared by all versions of one group/resource. */
export function storageKey(rt: { group: string; plural: string }): string {
  return `${rt.group}/${rt.plural}`;
}

function builtin(
  group: string,
  version: string,
  kind: string,
  plural: string,
  namespaced: boolean,
  extra: Partial<ResourceType> = {},
): ResourceType {
  return {
    group,
    version,
    plural,
    singular: kind.toLowerCase(),
    kind,
    listKind: `${kind}List`,
    namespaced,
    shortNames: [],
    categories: [],
    statusSubresource: false,
    custom: false,
    printerColumns: [],
    selectableFields: [],
    generation: false,
    ...extra,
  };
}

export const CRD_TYPE = builtin(
  'apiextensions.k8s.io',
  'v1',
  'CustomResourceDefinition',
  'customresourcedefinitions',
  false,
  { shortNames: ['crd', 'crds'], statusSubresource: true, generation: true },
);

export function builtinTypes(): ResourceType[] {
  return [
    builtin('', 'v1', 'Namespace', 'namespaces', false, {
      shortNames: ['ns'],
      statusSubresource: true,
    }),
    builtin('', 'v1', 'Secret', 'secrets', true, { selectableFields: ['type'] }),
    builtin('', 'v1', 'ConfigMap', 'configmaps', true, { shortNames: ['cm'] }),
    builtin('', 'v1', 'ServiceAccount', 'serviceaccounts', true, { shortNames: ['sa'] }),
    builtin('', 'v1', 'Event', 'events', true, {
      shortNames: ['ev'],
      selectableFields: [
        'involvedObject.kind',
        'involvedObject.namespace',
        'involvedObject.name',
        'involvedObject.uid',
        'involvedObject.apiVersion',
        'involvedObject.resourceVersion',
        'involvedObject.fieldPath',
        'reason',
        'reportingComponent',
        'source',
        'type',
      ],
    }),
    builtin('events.k8s.io', 'v1', 'Event', 'events', true, { shortNames: ['ev'] }),
    builtin('coordination.k8s.io', 'v1', 'Lease', 'leases', true),
    // The chart's Redis: `lookup` of the installed one in helm's upgrade checks.
    builtin('apps', 'v1', 'StatefulSet', 'statefulsets', true, {
      shortNames: ['sts'],
      statusSubresource: true,
      generation: true,
    }),
    builtin('rbac.authorization.k8s.io', 'v1', 'Role', 'roles', true),
    builtin('rbac.authorization.k8s.io', 'v1', 'ClusterRole', 'clusterroles', false),
    builtin('rbac.authorization.k8s.io', 'v1', 'RoleBinding', 'rolebindings', true),
    builtin('rbac.authorization.k8s.io', 'v1', 'ClusterRoleBinding', 'clusterrolebindings', false),
    CRD_TYPE,
  ];
}

interface CrdVersion {
  name: string;
  served?: boolean;
  storage?: boolean;
  subresources?: { status?: object };
  additionalPrinterColumns?: PrinterColumn[];
  selectableFields?: { jsonPath: string }[];
  schema?: { openAPIV3Schema?: OpenApiSchema };
}

export interface CrdSpec {
  group: string;
  scope: 'Namespaced' | 'Cluster';
  names: {
    kind: string;
    plural: string;
    singular?: string;
    listKind?: string;
    shortNames?: string[];
    categories?: string[];
  };
  versions: CrdVersion[];
}

/** The resource types one CRD serves, in the CRD's version order. */
export function typesFromCrd(spec: CrdSpec): ResourceType[] {
  return spec.versions
    .filter((v) => v.served !== false)
    .map((v) => ({
      group: spec.group,
      version: v.name,
      plural: spec.names.plural,
      singular: spec.names.singular ?? spec.names.kind.toLowerCase(),
      kind: spec.names.kind,
      listKind: spec.names.listKind ?? `${spec.names.kind}List`,
      namespaced: spec.scope !== 'Cluster',
      shortNames: spec.names.shortNames ?? [],
      categories: spec.names.categories ?? [],
      statusSubresource: v.subresources?.status !== undefined,
      custom: true,
      ...(v.schema?.openAPIV3Schema ? { schema: v.schema.openAPIV3Schema } : {}),
      printerColumns: v.additionalPrinterColumns ?? [],
      selectableFields: (v.selectableFields ?? []).map((f) => f.jsonPath.replace(/^\./, '')),
      generation: true,
    }));
}

/**
 * Kubernetes version priority (the preferred version comes first): GA before beta
 * before alpha, higher major then higher minor first, others alphabetically last.
 */
export function byVersionPriority(a: string, b: string): number {
  const rank = (v: string): [number, number, number] | undefined => {
    const m = /^v(\d+)(?:(alpha|beta)(\d+))?$/.exec(v);
    if (!m) return undefined;
    const stability = m[2] === 'alpha' ? 0 : m[2] === 'beta' ? 1 : 2;
    return [stability, Number(m[1]), Number(m[3] ?? 0)];
  };
  const ra = rank(a);
  const rb = rank(b);
  if (!ra || !rb) return ra ? -1 : rb ? 1 : a.localeCompare(b);
  for (let i = 0; i < 3; i++) {
    const diff = (rb[i] ?? 0) - (ra[i] ?? 0);
    if (diff !== 0) return diff;
  }
  return 0;
}

/** All served types, looked up by group/version/plural. Rebuilt when CRDs change. */
export class Registry {
  private readonly fixed: ResourceType[];
  private crdTypes = new Map<string, ResourceType[]>();

  constructor() {
    this.fixed = builtinTypes();
  }

  all(): ResourceType[] {
    return [...this.fixed, ...[...this.crdTypes.values()].flat()];
  }

  find(group: string, version: string, plural: string): ResourceType | undefined {
    return this.all().find(
      (t) => t.group === group && t.version === version && t.plural === plural,
    );
  }

  setCrd(crdName: string, spec: CrdSpec | undefined): void {
    if (spec) this.crdTypes.set(crdName, typesFromCrd(spec));
    else this.crdTypes.delete(crdName);
  }

  /** Groups in discovery order, each with its versions (first = preferred). */
  groups(): { group: string; versions: string[] }[] {
    const out = new Map<string, string[]>();
    for (const t of this.all()) {
      const versions = out.get(t.group) ?? [];
      if (!versions.includes(t.version)) versions.push(t.version);
      out.set(t.group, versions);
    }
    return [...out].map(([group, versions]) => ({
      group,
      versions: versions.sort(byVersionPriority),
    }));
  }
}
