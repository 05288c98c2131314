// Schema learning on the admin listener: a learning trigger's schema proposal, and the
// reset of its samples. Reading the proposal is reading the trigger (`get` on the
// WebhookTrigger); resetting the samples changes what the gateway keeps for it, so it
// is authorised like Send Test Request (`create` on `webhooktriggers/test`).
import type { FastifyInstance } from 'fastify';
import { OPEN_ACCESS, type AdminAccess } from '../admin/access.ts';
import { HttpProblem } from '../errors.ts';
import type { RouteRecord, RouteStore } from '../../api/records/records.ts';
import { isLearning } from '../../api/schemas.ts';
import { proposeSchema } from '../schema-learning/proposal.ts';
import type { SampleStore } from '../schema-learning/samples.ts';

export interface SchemaProposalRoutesOptions {
  /** The deployed triggers (route records carry their spec). */
  routes: RouteStore;
  samples: SampleStore;
  access?: AdminAccess;
}

export function schemaProposalRoutes(
  app: FastifyInstance,
  options: SchemaProposalRoutesOptions,
): void {
  const access = options.access ?? OPEN_ACCESS;
  const deployed = async (namespace: string, name: string): Promise<RouteRecord> => {
    const route = await options.routes.get(`${namespace}/${name}`);
    if (!route) {
      throw new HttpProblem(
        'HG_ERR_RESOURCE_NOT_FOUND',
        `WebhookTrigger ${namespace}/${name} is not deployed`,
      );
    }
    return route;
  };

  app.get('/api/triggers/:namespace/:name/schema-proposal', async (request) => {
    const { namespace, name } = request.params as { namespace: string; name: string };
    await access.require(request, { verb: 'get', resource: 'webhooktriggers', namespace, name });
    const route = await deployed(namespace, name);
    if (!isLearning(route.spec.schema)) {
      throw new HttpProblem(
        'HG_ERR_SCHEMA_NOT_LEARNING',
        `WebhookTrigger ${namespace}/${name} is not learning its schema: set spec.schema.mode automatic and spec.schema.learning.enabled true`,
      );
    }
    return proposeSchema(route.spec.schema, await options.samples.read(route.key));
  });

  app.delete('/api/triggers/:namespace/:name/schema-proposal/samples', async (request, reply) => {
    const { namespace, name } = request.params as { namespace: string; name: string };
    await access.require(request, {
      verb: 'create',
      resource: 'webhooktriggers',
      subresource: 'test',
      namespace,
      name,
    });
    const route = await deployed(namespace, name);
    await options.samples.clear(route.key);
    return reply.code(204).send();
  });
}
