// The read API over resources: triggers and workflows with their conditions, and
// the manifest problems of the embedded source. Read-only.
import type { FastifyInstance } from 'fastify';
import { OPEN_ACCESS, type AdminAccess } from '../admin/access.ts';
import { HttpProblem } from '../errors.ts';
import type { Resource } from '../../api/v1alpha1/index.ts';

type AnyResource = Resource<unknown, unknown>;
type ResourceKind = 'Workflow' | 'WebhookTrigger';

/** What the read API needs of a resource source (the control plane's cache). */
export interface ResourceReader {
  list(kind: ResourceKind): AnyResource[];
  get(ref: { kind: ResourceKind; namespace: string; name: string }): AnyResource | undefined;
}

export interface ResourceRoutesOptions {
  source: ResourceReader;
  /** Manifest problems (embedded source only). */
  manifestErrors?: () => unknown[];
  /** Who may read what (everything by default). */
  access?: AdminAccess;
}

function view(r: AnyResource): Record<string, unknown> {
  return {
    kind: r.kind,
    namespace: r.metadata.namespace ?? 'default',
    name: r.metadata.name,
    generation: r.metadata.generation,
    creationTimestamp: r.metadata.creationTimestamp,
    spec: r.spec,
    status: r.status ?? {},
  };
}

export function resourceRoutes(app: FastifyInstance, options: ResourceRoutesOptions): void {
  const { source } = options;
  const access = options.access ?? OPEN_ACCESS;
  const namespaceOf = (r: AnyResource) => r.metadata.namespace ?? 'default';
  const byName = (a: AnyResource, b: AnyResource) =>
    `${a.metadata.namespace}/${a.metadata.name}`.localeCompare(
      `${b.metadata.namespace}/${b.metadata.name}`,
    );

  app.get('/api/triggers', async (request) => {
    const items = source.list('WebhookTrigger').sort(byName);
    const visible = await access.filter(request, items, namespaceOf, {
      verb: 'list',
      resource: 'webhooktriggers',
    });
    return { items: visible.map(view) };
  });
  app.get('/api/workflows', async (request) => {
    const items = source.list('Workflow').sort(byName);
    const visible = await access.filter(request, items, namespaceOf, {
      verb: 'list',
      resource: 'workflows',
    });
    return { items: visible.map(view) };
  });
  app.get('/api/triggers/:namespace/:name', async (request) => {
    const { namespace, name } = request.params as { namespace: string; name: string };
    await access.require(request, { verb: 'get', resource: 'webhooktriggers', namespace, name });
    const found = source.get({ kind: 'WebhookTrigger', namespace, name });
    if (!found)
      throw new HttpProblem(
        'HG_ERR_RESOURCE_NOT_FOUND',
        `WebhookTrigger ${namespace}/${name} not found`,
      );
    return view(found);
  });
  app.get('/api/workflows/:namespace/:name', async (request) => {
    const { namespace, name } = request.params as { namespace: string; name: string };
    await access.require(request, { verb: 'get', resource: 'workflows', namespace, name });
    const found = source.get({ kind: 'Workflow', namespace, name });
    if (!found)
      throw new HttpProblem('HG_ERR_RESOURCE_NOT_FOUND', `Workflow ${namespace}/${name} not found`);
    return view(found);
  });
  app.get('/api/manifests/errors', async (request) => {
    await access.require(request, { verb: 'list', resource: 'webhooktriggers' });
    return { items: options.manifestErrors?.() ?? [] };
  });
}
