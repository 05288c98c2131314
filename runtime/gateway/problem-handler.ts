// Turns every error into an RFC 9457 problem document. Known errors come from the
// catalogue (HttpProblem); Fastify's own errors are mapped onto catalogue entries;
// anything else is an internal error whose details stay in the log, never the body.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  HttpProblem,
  PROBLEM_CONTENT_TYPE,
  StoreUnavailableError,
  type ErrorCode,
} from '../errors.ts';
import { installClientErrors, isClientGone } from './client-errors.ts';
import { setHeaders } from './response-headers.ts';
import { pathOf } from './route-table.ts';

const FASTIFY_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_BODY_TOO_LARGE: 'HG_ERR_BODY_TOO_LARGE',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'HG_ERR_UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'HG_ERR_BODY_MALFORMED',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'HG_ERR_BODY_MALFORMED',
  FST_ERR_CTP_INVALID_JSON_BODY: 'HG_ERR_BODY_MALFORMED',
  FST_ERR_VALIDATION: 'HG_ERR_INVALID_PARAMETER',
};

const FIXED_DETAIL: Partial<Record<ErrorCode, string>> = {
  HG_ERR_BODY_TOO_LARGE: 'The request body is larger than this endpoint accepts.',
  HG_ERR_UNSUPPORTED_MEDIA_TYPE: 'This Content-Type is not accepted here.',
  HG_ERR_BODY_MALFORMED: 'The request body is not valid',
};

/** Seconds a client waits before retrying a write Redis refused for memory. */
const STORE_FULL_RETRY_SECONDS = 30;

/**
 * Redis at its maxmemory with `noeviction` refuses writes with an `OOM command not
 * allowed` reply (in a script: `… OOM command not allowed …`).
 */
export function isStoreFull(error: unknown): boolean {
  const e = error as { name?: unknown; message?: unknown } | null;
  return (
    typeof e?.message === 'string' &&
    e.name === 'ReplyError' &&
    /(^|\W)OOM command not allowed/.test(e.message)
  );
}

/** Normalise any thrown value to an HttpProblem. */
export function toProblem(error: unknown): HttpProblem {
  if (error instanceof HttpProblem) return error;
  if (error instanceof StoreUnavailableError) return error.toProblem();
  if (isStoreFull(error)) {
    return new HttpProblem(
      'HG_ERR_STORE_FULL',
      'The shared store is at its memory limit and refused the write; nothing was accepted',
      { headers: { 'retry-after': String(STORE_FULL_RETRY_SECONDS) } },
    );
  }
  const e = error as Partial<FastifyError> & { type?: string };
  const mapped = e.code ? FASTIFY_CODES[e.code] : undefined;
  // Fastify's messages may quote the request (a Content-Type, a length): fixed details
  // instead, except for schema validation, whose messages name fields, not values.
  if (mapped)
    return new HttpProblem(
      mapped,
      e.code === 'FST_ERR_VALIDATION' ? e.message : FIXED_DETAIL[mapped],
    );
  if (e.name === 'SyntaxError' || e.type === 'entity.parse.failed') {
    return new HttpProblem('HG_ERR_BODY_MALFORMED', 'The request body is not valid JSON');
  }
  if (typeof e.statusCode === 'number' && e.statusCode === 413)
    return new HttpProblem('HG_ERR_BODY_TOO_LARGE');
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    const fastify = typeof e.code === 'string' && e.code.startsWith('FST_');
    return new HttpProblem(
      'HG_ERR_INVALID_PARAMETER',
      fastify ? 'The request is not valid.' : e.message,
    );
  }
  return new HttpProblem('HG_ERR_INTERNAL', 'An unexpected error occurred; it has been logged');
}

/** Send a problem response (also used by code that answers without throwing). */
export function sendProblem(
  reply: FastifyReply,
  request: FastifyRequest,
  error: unknown,
): FastifyReply {
  const problem = toProblem(error);
  setHeaders(reply, problem.headers);
  const doc = problem.toDocument(pathOf(request.url));
  reply.code(problem.status).type(PROBLEM_CONTENT_TYPE);
  return request.method === 'HEAD' ? reply.send() : reply.send(doc);
}

export function installProblemHandlers(app: FastifyInstance): void {
  installClientErrors(app);
  app.setErrorHandler((error, request, reply) => {
    if (isClientGone(error)) {
      // An aborted upload or a reset socket: the client left, nobody reads an answer.
      request.log.debug({ code: (error as { code?: unknown }).code }, 'client went away');
      return sendProblem(
        reply,
        request,
        new HttpProblem('HG_ERR_BAD_REQUEST', 'The request was aborted by the client.'),
      );
    }
    const problem = toProblem(error);
    if (problem.code === 'HG_ERR_INTERNAL') request.log.error({ err: error }, 'unhandled error');
    return sendProblem(reply, request, problem);
  });
  app.setNotFoundHandler((request, reply) =>
    sendProblem(
      reply,
      request,
      new HttpProblem('HG_ERR_NOT_FOUND', `Nothing at ${pathOf(request.url)}`),
    ),
  );
}
