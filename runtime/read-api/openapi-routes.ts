// OpenAPI 3.1 documents of the deployed endpoints (runtime/openapi/document.ts): one per
// WebhookTrigger, readable by whoever may `get` that trigger, and one of the whole
// gateway with the endpoints of the namespaces the reader may see. docs/openapi.md.
import type { FastifyInstance } from 'fastify';
import type { RouteStore } from '../../api/records/records.ts';
import { namespaceOfKey, OPEN_ACCESS, type AdminAccess } from '../admin/access.ts';
import { HttpProblem } from '../errors.ts';
import { gatewayDocument, triggerDocument } from '../openapi/document.ts';

export interface OpenApiRoutesOptions {
  routes: RouteStore;
  /** The public base URL of the webhook listener (the documents' server). */
  baseUrl: string;
  access?: AdminAccess;
}

export function openApiRoutes(app: FastifyInstance, options: OpenApiRoutesOptions): void {
  const access = options.access ?? OPEN_ACCESS;
  app.get('/api/triggers/:namespace/:name/openapi.json', async (request) => {
    const { namespace, name } = request.params as { namespace: string; name: string };
    await access.require(request, { verb: 'get', resource: 'webhooktriggers', namespace, name });
    const route = await options.routes.get(`${namespace}/${name}`);
    if (!route)
      throw new HttpProblem(
        'HG_ERR_ROUTE_NOT_FOUND',
        `WebhookTrigger ${namespace}/${name} is not deployed`,
      );
    return triggerDocument(route, options.baseUrl);
  });
  app.get('/api/openapi.json', async (request) => {
    const routes = await access.filter(
      request,
      await options.routes.list(),
      (r) => namespaceOfKey(r.key),
      { verb: 'get', resource: 'webhooktriggers' },
    );
    return gatewayDocument(routes, options.baseUrl);
  });
}
