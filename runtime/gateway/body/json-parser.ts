// The JSON parser of the routes outside the webhook path (the admin API's request
// bodies, such as Send Test Request). Fastify's own parser has no depth limit, and a
// body nested thousands of levels deep breaks whatever serialises it again, so the
// same input limits as the webhook path (input-limits.ts) are checked first; Fastify's
// parser then parses, with its prototype-poisoning checks. The webhook scope replaces
// every parser with its own (webhook-routes.ts), so this one never runs there.
import type { FastifyInstance } from 'fastify';
import { HttpProblem } from '../../errors.ts';
import { checkJsonLimits, DEFAULT_INPUT_LIMITS, type InputLimits } from './input-limits.ts';
import { parseMediaType } from './parse.ts';

export function installJsonLimits(
  app: FastifyInstance,
  limits: InputLimits = DEFAULT_INPUT_LIMITS,
): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const bytes = body as Buffer;
    try {
      // JSON is UTF-8 (RFC 8259 §8.1); another charset would be read as UTF-8 all the
      // same, so it is refused as the webhook side refuses one it cannot decode.
      const charset = parseMediaType(request.headers['content-type'])?.charset;
      if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8')
        throw new HttpProblem(
          'HG_ERR_UNSUPPORTED_MEDIA_TYPE',
          `JSON bodies are UTF-8; the charset "${charset.slice(0, 40)}" is not supported.`,
        );
      checkJsonLimits(bytes, limits);
    } catch (error) {
      done(error as Error, undefined);
      return;
    }
    void parse(request, bytes.toString('utf8'), done);
  });
}
