// The Fastify set-up both listeners share: one server factory with every slow-client
// timeout set explicitly, the role's logger with per-request lines at debug level,
// problem documents for every error, and SSE support. The webhook app (app.ts) and
// the admin app (admin/app.ts) each start from here.
import { createServer } from 'node:http';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import { CLIENT_ERROR_OPTIONS, requireHost } from './gateway/client-errors.ts';
import { installJsonLimits } from './gateway/body/json-parser.ts';
import { installProblemHandlers } from './gateway/problem-handler.ts';
import { installSse, ProcessStreams, type StreamListener } from './gateway/sse.ts';
import { gracefulConnections } from './graceful-close.ts';

/** Server-wide limits (slow clients, idle sockets); see docs/security.md. */
export const SERVER_LIMITS = {
  /** Time to receive a whole request (Node's default of 300 s is off under Fastify). */
  requestTimeout: 120_000,
  /** Time to receive the request headers: a client trickling them is cut off. */
  headersTimeout: 60_000,
  /** Above common load balancers' 60 s idle timeout, so they close first. */
  keepAliveTimeout: 72_000,
  /** How often Node checks the two timeouts above. */
  connectionsCheckingInterval: 5_000,
  /** The largest body any endpoint may accept (each endpoint sets its own lower limit). */
  bodyLimit: 16 * 1024 * 1024,
  /**
   * Shutdown: how long a keep-alive connection idle when the close began may still bring
   * one more request (answered with Connection: close) before it is ended with a FIN.
   */
  closeIdleGraceMs: 1_000,
  /** Shutdown: how long a connection ended while idle waits for the client's FIN. */
  closeLingerMs: 5_000,
  /**
   * Bytes an SSE stream may have waiting for a client that does not read them; past
   * it the stream ends (HOOKGATE_STREAM_BUFFER_BYTES). The client may reconnect with
   * Last-Event-ID.
   */
  sseBufferBytes: 1024 * 1024,
  /**
   * How long an ended SSE stream has to hand what it wrote to the client; a client that
   * does not read it by then has its connection reset (what was buffered is freed).
   */
  sseDrainMs: 15_000,
  /**
   * Event streams of one execution open at once on one listener (an execution link's
   * channel, the admin API's): the next is refused 429 execution-streams-exceeded
   * (HOOKGATE_STREAMS_PER_EXECUTION).
   */
  streamsPerExecution: 16,
  /**
   * Event streams open at once in the process, every listener and kind counted (SSE
   * Stream answers, execution channels, live endpoint streams): the next is refused 503
   * streams-exhausted (HOOKGATE_STREAMS_PER_PROCESS). Each may hold sseBufferBytes.
   */
  streamsPerProcess: 10_000,
};
export type ServerLimits = typeof SERVER_LIMITS;

/** A role's plugin: more routes in an encapsulated scope of their own. */
export type AppPlugin = (app: FastifyInstance) => void | Promise<void>;

/**
 * Fastify's two lines per request (received, completed) at debug level instead of
 * info: at info a short load test wrote hundreds of thousands of lines. The request is
 * named by its path, never its query string: that may carry a credential (an execution
 * link's token, an Async Callback URL with its receiver's token), which a log line
 * would hand to whoever reads the logs.
 */
class RequestLogsAtDebug extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    const query = request.url.indexOf('?');
    // Shaped for Fastify's `req` serializer, which picks these fields.
    const req = {
      method: request.method,
      url: query < 0 ? request.url : request.url.slice(0, query),
      host: request.host,
      ip: request.ip,
      socket: { remotePort: request.socket.remotePort },
    };
    request.log.debug({ req }, 'incoming request');
  }

  override requestCompleted(
    _error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    request.log.debug({ res: reply, responseTime: reply.elapsedTime }, 'request completed');
  }
}

export function createHttpApp(options: {
  logger?: FastifyBaseLogger | undefined;
  limits?: Partial<ServerLimits> | undefined;
  /**
   * The open streams of the process, shared by its listeners (limits.streamsPerProcess
   * is theirs then); an app of its own by default.
   */
  streams?: ProcessStreams | undefined;
  /** Which listener the app is, for the stream metrics' label (default webhook). */
  listener?: StreamListener;
}): { app: FastifyInstance; limits: ServerLimits } {
  const limits = { ...SERVER_LIMITS, ...options.limits };
  const app = Fastify({
    ...(options.logger ? { loggerInstance: options.logger } : { logger: false }),
    logController: new RequestLogsAtDebug(),
    // Our own server, so that every slow-client timeout is set explicitly (G6).
    // Its keep-alive connections close without a reset when the app closes
    // (graceful-close.ts; `forceCloseConnections: 'idle'` below calls into it).
    serverFactory: (handler) => {
      const graceful = gracefulConnections(handler, {
        idleGraceMs: limits.closeIdleGraceMs,
        lingerMs: limits.closeLingerMs,
      });
      const server = createServer(
        {
          requestTimeout: limits.requestTimeout,
          headersTimeout: limits.headersTimeout,
          keepAliveTimeout: limits.keepAliveTimeout,
          connectionsCheckingInterval: limits.connectionsCheckingInterval,
          requireHostHeader: false,
        },
        requireHost(graceful.listener),
      );
      graceful.attach(server);
      return server;
    },
    requestTimeout: limits.requestTimeout,
    keepAliveTimeout: limits.keepAliveTimeout,
    bodyLimit: limits.bodyLimit,
    ...CLIENT_ERROR_OPTIONS,
    forceCloseConnections: 'idle',
    routerOptions: { maxParamLength: 500 },
  });
  installProblemHandlers(app);
  installJsonLimits(app);
  installSse(app, {
    bufferBytes: limits.sseBufferBytes,
    drainMs: limits.sseDrainMs,
    maxPerExecution: limits.streamsPerExecution,
    process: options.streams ?? new ProcessStreams(limits.streamsPerProcess),
    listener: options.listener ?? 'webhook',
  });
  return { app, limits };
}

/** Registers each plugin in its own encapsulated scope. */
export async function registerPlugins(app: FastifyInstance, plugins: AppPlugin[]): Promise<void> {
  for (const plugin of plugins) {
    await app.register(async (scope) => {
      await plugin(scope);
    });
  }
}
