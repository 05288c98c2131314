// The read API over resources: triggers and workflows with their conditions, and
// the manifest problems of the embedded source. Read-only.
import type { FastifyInstance } from 'fastify';
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
  const byName = (a: AnyResource, b: AnyResource) =>
    `${a.metadata.namespace}/${a.metadata.name}`.localeCompare(
      `${b.metadata.namespace}/${b.metadata.name}`,
    );

  app.get('/api/triggers', () => ({ items: source.list('WebhookTrigger').sort(byName).map(view) }));
  app.get('/api/workflows', () => ({ items: source.list('Workflow').sort(byName).map(view) }));
  app.get('/api/triggers/:namespace/:name', (request) => {
    const { namespace, name } = request.params as { namespace: string; name: string };
    const found = source.get({ kind: 'WebhookTrigger', namespace, name });
    if (!found)
      throw new HttpProblem(
        'HG_ERR_RESOURCE_NOT_FOUND',
        `WebhookTrigger ${namespace}/${name} not found`,
      );
    return view(found);
  });
  app.get('/api/workflows/:namespace/:name', (request) => {
    const { namespace, name } = request.params as { namespace: string; name: string };
    const found = source.get({ kind: 'Workflow', namespace, name });
    if (!found)
      throw new HttpProblem('HG_ERR_RESOURCE_NOT_FOUND', `Workflow ${namespace}/${name} not found`);
    return view(found);
  });
  app.get('/api/manifests/errors', () => ({ items: options.manifestErrors?.() ?? [] }));
}
