// Errors that never reach a route (Node's parser, Fastify's router, Expect, CONNECT,
// closing) are problem documents from the catalogue, and echo nothing of the request.
import { createServer } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { gracefulConnections } from '../../runtime/graceful-close.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENT_ERROR_OPTIONS, requireHost } from '../../runtime/gateway/client-errors.ts';
import { installProblemHandlers } from '../../runtime/gateway/problem-handler.ts';
import { rawRequest, type Delivery } from '../hostile/raw-client.ts';

const whole: Delivery = { kind: 'whole', pieces: 1, delayMs: 0, cut: 1 };

async function build(): Promise<{ app: FastifyInstance; port: number }> {
  const app = Fastify({
    // As runtime/http-app.ts builds it: keep-alive connections close gracefully.
    serverFactory: (handler) => {
      const graceful = gracefulConnections(handler, { idleGraceMs: 500, lingerMs: 1000 });
      const server = createServer(
        {
          headersTimeout: 500,
          requestTimeout: 1000,
          connectionsCheckingInterval: 100,
          requireHostHeader: false,
        },
        requireHost(graceful.listener),
      );
      graceful.attach(server);
      return server;
    },
    forceCloseConnections: 'idle',
    routerOptions: { maxParamLength: 500 },
    ...CLIENT_ERROR_OPTIONS,
  });
  installProblemHandlers(app);
  app.post('/webhook/:id', () => ({ ok: true }));
  app.get('/slow', async () => {
    await new Promise((resolve) => setTimeout(resolve, 300));
    return { ok: true };
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, port: (app.server.address() as AddressInfo).port };
}

describe('client errors', () => {
  let app: FastifyInstance;
  let port = 0;
  const send = async (text: string | Buffer, delivery = whole) => {
    const answer = await rawRequest(
      port,
      Buffer.isBuffer(text) ? text : Buffer.from(text, 'latin1'),
      delivery,
      {
        head: false,
        timeoutMs: 5000,
      },
    );
    const body = answer.body.toString('utf8');
    return {
      status: answer.status,
      headers: answer.headers,
      body,
      doc: body ? (JSON.parse(body) as Record<string, unknown>) : undefined,
    };
  };

  beforeAll(async () => {
    ({ app, port } = await build());
  });
  afterAll(async () => {
    app.server.closeAllConnections();
    await app.close();
  });

  it.each([
    ['an unknown method', 400, 'bad-request', 'GETT / HTTP/1.1\r\nHost: x\r\n\r\n'],
    ['a broken request line', 400, 'bad-request', 'GET / HTTX/1.1\r\nHost: x\r\n\r\n'],
    [
      'bad chunked encoding',
      400,
      'bad-request',
      'POST /webhook/a HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n',
    ],
    [
      'an invalid header name',
      400,
      'bad-request',
      'GET / HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n\r\n',
    ],
    [
      'headers over 16 KiB',
      431,
      'headers-too-large',
      `GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'h'.repeat(20_000)}\r\n\r\n`,
    ],
    [
      'a URL with bad percent-encoding',
      400,
      'malformed-url',
      'GET /webhook/%ZZ<script> HTTP/1.1\r\nHost: x\r\n\r\n',
    ],
    [
      'a path parameter over 500 characters',
      414,
      'uri-too-long',
      `POST /webhook/${'p'.repeat(600)} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n`,
    ],
    [
      'an Expect it cannot meet',
      417,
      'expectation-failed',
      'POST /webhook/a HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nContent-Length: 0\r\n\r\n',
    ],
    ['CONNECT', 400, 'bad-request', 'CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n'],
    ['an HTTP/1.1 request without Host', 400, 'bad-request', 'GET /healthz HTTP/1.1\r\n\r\n'],
    [
      'a Content-Type no parser takes',
      415,
      'unsupported-media-type',
      'POST /webhook/a HTTP/1.1\r\nHost: x\r\nContent-Type: text/x-<script>\r\nContent-Length: 2\r\n\r\nhi',
    ],
  ] as const)('%s → %i %s', async (_name, status, type, request) => {
    const answer = await send(request);
    expect(answer.status).toBe(status);
    expect(answer.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(answer.doc).toMatchObject({ type: `https://hookgate.dev/problems/${type}`, status });
    expect(typeof answer.doc?.detail).toBe('string');
    expect(answer.body).not.toContain('%ZZ');
    expect(answer.body).not.toContain('<script>');
    expect(answer.body).not.toContain('ppppp');
  });

  it('garbage after a request on the same connection: the first answer still arrives', async () => {
    for (const first of ['GET /webhook/%ZZ HTTP/1.1', 'PROPFIND /nope HTTP/1.1']) {
      const answer = await send(`${first}\r\nHost: x\r\n\r\n{"s":"${'s'.repeat(50_000)}"}`);
      expect(answer.status, first).toBeGreaterThanOrEqual(400);
      expect(answer.headers['content-type']).toMatch(/^application\/problem\+json/);
    }
  });

  it('headers trickled past the headers timeout → 408 client-timeout, connection closed', async () => {
    const answer = await send('GET / HTTP/1.1\r\nHost: x\r\nX-Slow: 1', {
      kind: 'truncated',
      pieces: 1,
      delayMs: 0,
      cut: 1,
    });
    expect(answer.status).toBe(408);
    expect(answer.headers.connection).toBe('close');
    expect(answer.doc).toMatchObject({ type: 'https://hookgate.dev/problems/client-timeout' });
  });

  it('a request that arrives on a kept-alive connection while the server closes is answered, then the connection ends', async () => {
    const { app: closing, port: closingPort } = await build();
    // A keep-alive connection, idle when close() begins; its next request comes after.
    const socket = connect({ port: closingPort, host: '127.0.0.1' });
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    const errors: string[] = [];
    socket.on('error', (error: NodeJS.ErrnoException) => errors.push(String(error.code)));
    const ended = new Promise((resolve) => socket.on('close', resolve));
    socket.write('POST /webhook/a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(Buffer.concat(chunks).toString('utf8')).toMatch(/^HTTP\/1\.1 200/);
    const closed = closing.close();
    await new Promise((resolve) => setTimeout(resolve, 50));
    socket.write('GET /slow HTTP/1.1\r\nHost: x\r\n\r\n');
    await closed;
    await ended;
    const text = Buffer.concat(chunks).toString('utf8');
    const second = text.slice(text.indexOf('HTTP/1.1', 1));
    expect(second).toMatch(/^HTTP\/1\.1 200/);
    expect(second).toMatch(/\r\nconnection: close\r\n/i);
    expect(errors).toEqual([]);
  });

  it('a request in flight when the server closes is answered with Connection: close', async () => {
    const { app: closing, port: closingPort } = await build();
    const socket = connect({ port: closingPort, host: '127.0.0.1' });
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    const errors: string[] = [];
    socket.on('error', (error: NodeJS.ErrnoException) => errors.push(String(error.code)));
    const ended = new Promise((resolve) => socket.on('close', resolve));
    socket.write('GET /slow HTTP/1.1\r\nHost: x\r\n\r\n');
    await new Promise((resolve) => setTimeout(resolve, 50));
    await closing.close();
    await ended;
    const text = Buffer.concat(chunks).toString('utf8');
    expect(text).toMatch(/^HTTP\/1\.1 200/);
    expect(text).toMatch(/\r\nconnection: close\r\n/i);
    expect(errors).toEqual([]);
  });

  it('a connection idle when the server closes is ended with a FIN after the grace, never reset', async () => {
    const { app: closing, port: closingPort } = await build();
    const socket = connect({ port: closingPort, host: '127.0.0.1' });
    const events: string[] = [];
    socket.on('data', () => undefined);
    socket.on('end', () => events.push('end'));
    socket.on('error', (error: NodeJS.ErrnoException) => events.push(String(error.code)));
    socket.write('POST /webhook/a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n');
    await new Promise((resolve) => setTimeout(resolve, 100));
    const started = Date.now();
    const closed = closing.close();
    await new Promise((resolve) => socket.once('end', resolve));
    const endedAfter = Date.now() - started;
    socket.end();
    await closed;
    expect(events).toEqual(['end']);
    // Not at once: the connection had idleGraceMs (500) to bring another request.
    expect(endedAfter).toBeGreaterThanOrEqual(400);
  });
});
