// OpenAPI v3 (K29): `/openapi/v3` lists one document per group/version, each with a
// content hash; the document carries the kinds' schemas (for `kubectl explain`) and
// PATCH operations with `x-kubernetes-group-version-kind`, the `fieldValidation`
// query parameter and the accepted patch types (for `kubectl apply`'s server-side
// field validation check).
import { createHash } from 'node:crypto';
import type { OpenApiSchema } from './schema/types.ts';
import type { Registry, ResourceType } from './resources.ts';

function gvPath(group: string, version: string): string {
  return group ? `apis/${group}/${version}` : `api/${version}`;
}

function schemaName(rt: ResourceType): string {
  const reversed = rt.group ? rt.group.split('.').reverse().join('.') : 'io.k8s.api.core';
  return `${reversed}.${rt.version}.${rt.kind}`;
}

const OBJECT_META: OpenApiSchema = {
  type: 'object',
  description: 'Standard object metadata.',
  'x-kubernetes-preserve-unknown-fields': true,
};

function kindSchema(rt: ResourceType): OpenApiSchema {
  const gvk = [{ group: rt.group, version: rt.version, kind: rt.kind }];
  if (!rt.schema) {
    return {
      type: 'object',
      description: `${rt.kind} (schema not modelled by the test API server).`,
      properties: {
        apiVersion: { type: 'string' },
        kind: { type: 'string' },
        metadata: OBJECT_META,
      },
      'x-kubernetes-preserve-unknown-fields': true,
      'x-kubernetes-group-version-kind': gvk,
    };
  }
  const schema = structuredClone(rt.schema);
  schema.properties = { ...schema.properties, metadata: OBJECT_META };
  return { ...schema, 'x-kubernetes-group-version-kind': gvk };
}

const PARAM = (name: string, description: string): Record<string, unknown> => ({
  name,
  in: 'query',
  description,
  schema: { type: 'string', uniqueItems: true },
});

function operations(rt: ResourceType, ref: object): Record<string, unknown> {
  const gvk = { group: rt.group, version: rt.version, kind: rt.kind };
  const types = [
    'application/json-patch+json',
    'application/merge-patch+json',
    'application/apply-patch+yaml',
  ];
  // No strategic-merge-patch here, not even for built-ins: kubectl would then compute
  // the patch from these (open) schemas and warn; without it, it uses its compiled-in
  // types for built-ins and a JSON merge patch for CRs.
  const response = {
    '200': { description: 'OK', content: { 'application/json': { schema: ref } } },
  };
  const op = (action: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
    operationId: `${action}${rt.kind}`,
    responses: response,
    'x-kubernetes-action': action,
    'x-kubernetes-group-version-kind': gvk,
    ...extra,
  });
  const fieldParams = [
    PARAM('dryRun', 'When present, indicates that modifications should not be persisted.'),
    PARAM('fieldManager', 'A name associated with the actor or entity making these changes.'),
    PARAM('fieldValidation', 'Ignore, Warn or Strict handling of unknown or duplicate fields.'),
  ];
  return {
    get: op('get'),
    put: op('put', {
      parameters: fieldParams,
      requestBody: { content: { 'application/json': { schema: ref } } },
    }),
    patch: op('patch', {
      parameters: [...fieldParams, PARAM('force', 'Force is going to "force" Apply requests.')],
      requestBody: {
        content: Object.fromEntries(types.map((t) => [t, { schema: { type: 'object' } }])),
      },
    }),
    delete: op('delete'),
  };
}

/** The OpenAPI document of one group/version. */
export function groupVersionDoc(registry: Registry, group: string, version: string): unknown {
  const types = registry.all().filter((t) => t.group === group && t.version === version);
  if (types.length === 0) return undefined;
  const paths: Record<string, unknown> = {};
  const schemas: Record<string, unknown> = {};
  for (const rt of types) {
    const ref = { $ref: `#/components/schemas/${schemaName(rt)}` };
    schemas[schemaName(rt)] = kindSchema(rt);
    const base = `/${gvPath(group, version)}${rt.namespaced ? '/namespaces/{namespace}' : ''}/${rt.plural}`;
    paths[`${base}/{name}`] = operations(rt, ref);
    if (rt.statusSubresource) paths[`${base}/{name}/status`] = operations(rt, ref);
  }
  return {
    openapi: '3.0.0',
    info: { title: 'Kubernetes', version: 'v1.35.0' },
    paths,
    components: { schemas },
  };
}

export function docHash(doc: unknown): string {
  return createHash('sha512').update(JSON.stringify(doc)).digest('hex').slice(0, 64).toUpperCase();
}

/** The `/openapi/v3` index with serverRelativeURL and hash per group/version. */
export function openApiIndex(registry: Registry): unknown {
  const paths: Record<string, unknown> = {};
  for (const g of registry.groups()) {
    for (const version of g.versions) {
      const path = gvPath(g.group, version);
      const hash = docHash(groupVersionDoc(registry, g.group, version));
      paths[path] = { serverRelativeURL: `/openapi/v3/${path}?hash=${hash}` };
    }
  }
  return { paths };
}
