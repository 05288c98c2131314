// The JSON parser of the routes outside the webhook path (the admin API's request
// bodies, such as Send Test Request). Fastify's own parser has no depth limit, and a
// body nested thousands of levels deep breaks whatever serialises it again, so the
// same input limits as the webhook path (input-limits.ts) are checked first; Fastify's
// parser then parses, with its prototype-poisoning checks. The webhook scope replaces
// every parser with its own (webhook-routes.ts), so this one never runs there.
import type { FastifyInstance } from 'fastify';
import { checkJsonLimits, DEFAULT_INPUT_LIMITS, type InputLimits } from './input-limits.ts';

export function installJsonLimits(
  app: FastifyInstance,
  limits: InputLimits = DEFAULT_INPUT_LIMITS,
): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const bytes = body as Buffer;
    try {
      checkJsonLimits(bytes, limits);
    } catch (error) {
      done(error as Error, undefined);
      return;
    }
    void parse(request, bytes.toString('utf8'), done);
  });
}
