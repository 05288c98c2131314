// Discovery (K28): aggregated (apidiscovery.k8s.io/v2) when the client asks for it,
// legacy APIVersions/APIGroupList/APIResourceList otherwise. Built from the registry,
// so a new CRD shows up at once.
import { VERBS, type Registry, type ResourceType } from './resources.ts';

export const AGGREGATED_CONTENT_TYPE =
  'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList';

export function wantsAggregated(accept: string | undefined): boolean {
  return (accept ?? '').includes('as=APIGroupDiscoveryList') && (accept ?? '').includes('v=v2');
}

function gvk(rt: ResourceType): { group: string; version: string; kind: string } {
  return { group: rt.group, version: rt.version, kind: rt.kind };
}

function aggregatedResource(rt: ResourceType): Record<string, unknown> {
  return {
    resource: rt.plural,
    responseKind: gvk(rt),
    scope: rt.namespaced ? 'Namespaced' : 'Cluster',
    singularResource: rt.singular,
    verbs: VERBS,
    ...(rt.shortNames.length ? { shortNames: rt.shortNames } : {}),
    ...(rt.categories.length ? { categories: rt.categories } : {}),
    subresources: rt.statusSubresource
      ? [{ subresource: 'status', responseKind: gvk(rt), verbs: ['get', 'patch', 'update'] }]
      : [],
  };
}

/** `/api` (core only) or `/apis` (all named groups) as an APIGroupDiscoveryList. */
export function aggregatedDiscovery(registry: Registry, core: boolean): unknown {
  const groups = registry.groups().filter((g) => (g.group === '') === core);
  return {
    kind: 'APIGroupDiscoveryList',
    apiVersion: 'apidiscovery.k8s.io/v2',
    metadata: {},
    items: groups.map((g) => ({
      metadata: g.group ? { name: g.group } : {},
      versions: g.versions.map((version) => ({
        version,
        resources: registry
          .all()
          .filter((t) => t.group === g.group && t.version === version)
          .map(aggregatedResource),
        freshness: 'Current',
      })),
    })),
  };
}

export function apiVersions(serverAddress: string): unknown {
  return {
    kind: 'APIVersions',
    versions: ['v1'],
    serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }],
  };
}

function apiGroup(g: { group: string; versions: string[] }): Record<string, unknown> {
  const versions = g.versions.map((version) => ({
    groupVersion: `${g.group}/${version}`,
    version,
  }));
  return { name: g.group, versions, preferredVersion: versions[0] };
}

export function apiGroupList(registry: Registry): unknown {
  return {
    kind: 'APIGroupList',
    apiVersion: 'v1',
    groups: registry
      .groups()
      .filter((g) => g.group !== '')
      .map(apiGroup),
  };
}

export function apiGroupDoc(registry: Registry, group: string): unknown {
  const g = registry.groups().find((x) => x.group === group);
  return g ? { kind: 'APIGroup', apiVersion: 'v1', ...apiGroup(g) } : undefined;
}

export function apiResourceList(registry: Registry, group: string, version: string): unknown {
  const types = registry.all().filter((t) => t.group === group && t.version === version);
  if (types.length === 0) return undefined;
  const resources = types.flatMap((t) => {
    const main = {
      name: t.plural,
      singularName: t.singular,
      namespaced: t.namespaced,
      kind: t.kind,
      verbs: VERBS,
      ...(t.shortNames.length ? { shortNames: t.shortNames } : {}),
      ...(t.categories.length ? { categories: t.categories } : {}),
    };
    const status = {
      name: `${t.plural}/status`,
      singularName: '',
      namespaced: t.namespaced,
      kind: t.kind,
      verbs: ['get', 'patch', 'update'],
    };
    return t.statusSubresource ? [main, status] : [main];
  });
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: group ? `${group}/${version}` : version,
    resources,
  };
}
