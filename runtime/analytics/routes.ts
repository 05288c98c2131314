// The analytics API: GET /api/analytics/summary (cards, both top lists and the
// requests-over-time series in one answer) and GET /api/analytics/options (values for
// the dashboard's dropdowns). Read-only. Bad filters throw HttpProblem
// (HG_ERR_INVALID_PARAMETER, 400); the application's error handler serialises it.
import type { FastifyError, FastifyPluginCallback, FastifyReply, FastifyRequest } from 'fastify';
import { HttpProblem, PROBLEM_CONTENT_TYPE } from '../errors.ts';
import type { AnalyticsBackend } from './backend.ts';
import { parseFilter } from './filter.ts';

export interface AnalyticsRoutesOptions {
  backend: AnalyticsBackend;
}

type Query = Record<string, string | string[] | undefined>;

/** Register with `app.register(analyticsRoutes, { backend })`. */
export const analyticsRoutes: FastifyPluginCallback<AnalyticsRoutesOptions> = (app, opts, done) => {
  const { backend } = opts;
  app.get('/api/analytics/summary', async (request, reply) => {
    const filter = parseFilter(request.query as Query);
    const result = await logFailure(request, backend.query(filter));
    void reply.header('cache-control', 'no-store');
    return { filter, ...result };
  });
  app.get('/api/analytics/options', async (request, reply) => {
    const filter = parseFilter(request.query as Query);
    const options = await logFailure(request, backend.options(filter));
    void reply.header('cache-control', 'no-store');
    return options;
  });
  done();
};

/**
 * A backend failure (Prometheus down or slow) is answered as its 503/504 problem; the
 * cause (which the problem never carries) goes to the request's log.
 */
async function logFailure<T>(request: FastifyRequest, work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (err) {
    const cause = err instanceof Error ? err.cause : undefined;
    request.log.warn({ err: cause ?? err }, 'analytics backend failed');
    throw err;
  }
}

/**
 * An error handler that answers HttpProblem as application/problem+json and anything
 * else as an internal problem without details. The gateway has its own; this one is
 * for apps that serve only analytics (tests, the bench).
 */
export function problemErrorHandler(
  error: FastifyError | HttpProblem,
  request: FastifyRequest,
  reply: FastifyReply,
): FastifyReply {
  const problem =
    error instanceof HttpProblem
      ? error
      : error.validation
        ? new HttpProblem('HG_ERR_INVALID_PARAMETER', error.message)
        : new HttpProblem('HG_ERR_INTERNAL');
  if (!(error instanceof HttpProblem) && !error.validation) request.log.error(error);
  return reply
    .code(problem.status)
    .headers(problem.headers)
    .type(PROBLEM_CONTENT_TYPE)
    .send(problem.toDocument(request.url.split('?')[0]));
}
