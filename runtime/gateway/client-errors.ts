// The errors that never reach a route: Node's HTTP parser refusing a request (bad
// request line or method, bad chunked encoding, headers too large, a client too slow),
// Fastify's router refusing a URL (bad percent-encoding, a parameter too long), an
// `Expect` the server cannot meet, CONNECT, and requests that arrive while the server closes.
// Each is answered with a problem document from the catalogue, like every other error
// (docs/errors.md), and never echoes the request. A client that went away is logged
// at debug level: it is not the server's error. They are sandboxed as every answer of
// the webhook listener is (SANDBOX_HEADERS; the onRequest hook never ran for them).
//
// runtime/app.ts spreads CLIENT_ERROR_OPTIONS into the Fastify options, and
// installProblemHandlers() (problem-handler.ts) calls installClientErrors().
import {
  STATUS_CODES,
  type IncomingMessage,
  type RequestListener,
  type ServerResponse,
} from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  CATALOGUE,
  HttpProblem,
  PROBLEM_CONTENT_TYPE,
  problemType,
  type ErrorCode,
} from '../errors.ts';
import { isLingering } from '../graceful-close.ts';
import { SANDBOX_HEADERS } from './response-headers.ts';

/** Error codes of a client that went away: nothing to answer, nothing to alarm about. */
const CLIENT_GONE = new Set([
  'ECONNRESET',
  'EPIPE',
  'ECONNABORTED',
  'ERR_STREAM_PREMATURE_CLOSE',
  'FST_ERR_CTP_ABORTED',
]);

/** True when `error` says the client aborted (a reset socket, an aborted upload). */
export function isClientGone(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && CLIENT_GONE.has(code)) return true;
  return message === 'aborted' || message === 'Request aborted';
}

/** Node's HTTP parser error → the catalogue entry and a detail that names no input. */
function parserProblem(code: string | undefined): { code: ErrorCode; detail: string } {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return {
        code: 'HG_ERR_HEADERS_TOO_LARGE',
        detail: 'The request line and headers are larger than the server accepts.',
      };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return {
        code: 'HG_ERR_CLIENT_TIMEOUT',
        detail: 'The request was not received within the server’s timeout.',
      };
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return { code: 'HG_ERR_BODY_TOO_LARGE', detail: 'Chunk extensions are too large.' };
    case 'HPE_INVALID_METHOD':
      return { code: 'HG_ERR_BAD_REQUEST', detail: 'The request method is not recognised.' };
    case 'HPE_INVALID_CHUNK_SIZE':
    case 'HPE_INVALID_TRANSFER_ENCODING':
    case 'HPE_UNEXPECTED_CONTENT_LENGTH':
    case 'HPE_INVALID_CONTENT_LENGTH':
      return { code: 'HG_ERR_BAD_REQUEST', detail: 'The request body framing is invalid.' };
    case 'HPE_INVALID_HEADER_TOKEN':
    case 'HPE_INVALID_HEADER_VALUE':
    case 'HPE_LF_EXPECTED':
    case 'HPE_CR_EXPECTED':
      return { code: 'HG_ERR_BAD_REQUEST', detail: 'A request header is malformed.' };
    default:
      return { code: 'HG_ERR_BAD_REQUEST', detail: 'The HTTP request could not be parsed.' };
  }
}

/** The JSON of a problem document without `instance`: the request may not be trusted. */
export function problemJson(code: ErrorCode, detail: string): string {
  const entry = CATALOGUE[code];
  return JSON.stringify({
    type: problemType(code),
    title: entry.title,
    status: entry.status,
    detail,
    code,
  });
}

/** A whole HTTP/1.1 response carrying a problem document, for a socket with no response. */
const RAW_SANDBOX_HEADERS = Object.entries(SANDBOX_HEADERS)
  .map(([name, value]) => `${name}: ${value}\r\n`)
  .join('');

export function rawProblemResponse(code: ErrorCode, detail: string): string {
  const status = CATALOGUE[code].status;
  const body = problemJson(code, detail);
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\n` +
    `Content-Type: ${PROBLEM_CONTENT_TYPE}\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    RAW_SANDBOX_HEADERS +
    'Connection: close\r\n\r\n' +
    body
  );
}

/**
 * Node answers an HTTP/1.1 request without a Host header (RFC 9112 §3.2) itself, with
 * a bare 400 and no body. The servers are made with `requireHostHeader: false` and
 * this wrapper gives the same refusal as a problem document, as every other.
 */
export function requireHost(listener: RequestListener): RequestListener {
  return (req, res) => {
    if (req.headers.host !== undefined || req.httpVersionMajor !== 1 || req.httpVersionMinor !== 1)
      return listener(req, res);
    const body = problemJson('HG_ERR_BAD_REQUEST', 'An HTTP/1.1 request needs a Host header.');
    res.writeHead(400, {
      'content-type': PROBLEM_CONTENT_TYPE,
      'content-length': Buffer.byteLength(body),
      ...SANDBOX_HEADERS,
      connection: 'close',
    });
    res.end(body);
  };
}

/** How long a refused connection may linger so that the client reads the answer. */
const LINGER_MS = 1_000;
const answered = new WeakSet<Socket>();

interface SocketWithResponse extends Socket {
  _httpMessage?: ServerResponse | null;
}

/** Ends the socket and destroys it if the client does not close within LINGER_MS. */
function endAndLinger(socket: Socket, data?: string): void {
  if (data === undefined) socket.end();
  else socket.end(data);
  socket.resume();
  setTimeout(() => socket.destroy(), LINGER_MS).unref();
}

/**
 * Fastify's clientErrorHandler: Node's `clientError` event. Writes a problem response
 * when no response has started on the socket, then closes it; a client that reset the
 * connection gets nothing and is logged at debug level.
 */
export function clientErrorHandler(
  this: FastifyInstance,
  error: Error & { code?: string },
  socket: Socket,
): void {
  if (answered.has(socket)) return;
  // Its last answer is written and the socket drains until the client closes: bytes
  // the parser refuses now (data after an HTTP/1.0 request) get no second answer.
  if (isLingering(socket)) return;
  answered.add(socket);
  if (isClientGone(error) || socket.destroyed) {
    this.log.debug({ code: error.code }, 'client went away');
    socket.destroy();
    return;
  }
  const { code, detail } = parserProblem(error.code);
  this.log.debug({ code: error.code, problem: code }, 'client error');
  const inFlight = (socket as SocketWithResponse)._httpMessage;
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  if (inFlight?.headersSent) {
    // The answer to an earlier request on this connection is under way (perhaps still
    // corked in the socket): let it finish, then close; no second answer.
    if (inFlight.writableFinished) endAndLinger(socket);
    else {
      inFlight.once('finish', () => endAndLinger(socket));
      inFlight.once('close', () => endAndLinger(socket));
    }
    return;
  }
  // end(), not write() and destroy(): a reset could reach the client before the answer.
  endAndLinger(socket, rawProblemResponse(code, detail));
}

/** Fastify's frameworkErrors: the router's refusals, answered without echoing the URL. */
export function frameworkErrors(
  error: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
): void {
  const problem =
    error.code === 'FST_ERR_BAD_URL'
      ? new HttpProblem('HG_ERR_BAD_URL', 'The URL path is not validly percent-encoded.')
      : error.code === 'FST_ERR_MAX_PARAM_LENGTH'
        ? new HttpProblem('HG_ERR_URI_TOO_LONG', 'A segment of the URL path is too long.')
        : new HttpProblem('HG_ERR_BAD_REQUEST', 'The request could not be routed.');
  request.log.debug({ code: error.code }, 'framework error');
  const doc = problem.toDocument();
  reply.code(problem.status).type(PROBLEM_CONTENT_TYPE).headers(SANDBOX_HEADERS);
  void (request.method === 'HEAD' ? reply.send() : reply.send(doc));
}

/** Fastify options for runtime/app.ts; spread after the app's own. */
export const CLIENT_ERROR_OPTIONS = {
  clientErrorHandler,
  frameworkErrors,
  // Fastify's own 503 while closing is not a problem document: installClientErrors()
  // answers shutting-down instead.
  return503OnClosing: false,
} as const;

function answerExpectation(_request: IncomingMessage, response: ServerResponse): void {
  const body = problemJson(
    'HG_ERR_EXPECTATION_FAILED',
    'Only "Expect: 100-continue" is supported.',
  );
  response.writeHead(417, {
    'content-type': PROBLEM_CONTENT_TYPE,
    'content-length': Buffer.byteLength(body),
    ...SANDBOX_HEADERS,
    connection: 'close',
  });
  response.end(body);
}

/** Requests that sent `Expect: 100-continue`, until their body is wanted. */
const continueDue = new WeakMap<IncomingMessage, ServerResponse>();

/**
 * Says `100 Continue` to a request that asked for it, now that its body is wanted: after
 * authentication and the size check, so that a request refused there (401, 413, ...)
 * gets its final answer instead of an invitation to send the body (RFC 9110 §10.1.1).
 * Nothing for any other request.
 */
export function sendContinue(request: IncomingMessage): void {
  const response = continueDue.get(request);
  if (response === undefined) return;
  continueDue.delete(request);
  if (!response.headersSent) response.writeContinue();
}

/**
 * The parts that need the instance: the 417 answer (Node's `checkExpectation` event),
 * `100 Continue` held back until the body is read (Node's `checkContinue` event: Node
 * would otherwise send it before any hook ran), and `Connection: close` on requests
 * that arrive while the server closes.
 */
export function installClientErrors(app: FastifyInstance): void {
  app.server.on('checkExpectation', answerExpectation);
  app.server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    continueDue.set(request, response);
    app.server.emit('request', request, response);
  });
  // Without a listener Node closes a CONNECT request's socket without a word.
  app.server.on('connect', (_request: IncomingMessage, socket: Socket) => {
    // Node hands the socket over with no error listener: a reset must not throw.
    socket.on('error', () => socket.destroy());
    socket.end(rawProblemResponse('HG_ERR_BAD_REQUEST', 'CONNECT is not supported.'));
    setTimeout(() => socket.destroy(), LINGER_MS).unref();
  });
  // Once close() has begun the listener takes no new connections, but a kept-alive
  // connection may still bring a request: serve it, and end the connection after
  // the answer (Connection: close), so the client reconnects elsewhere without an
  // error. A 503 here was an error the caller never needed to see.
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  app.addHook('onRequest', (_request, reply, done) => {
    if (closing) void reply.header('connection', 'close');
    done();
  });
  // A request already in flight when the close began: its answer closes the connection
  // too, so the client does not send its next request on a connection about to end.
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (closing && !reply.raw.headersSent) void reply.header('connection', 'close');
    done(null, payload);
  });
}
