// An answer that ends its connection while the client is still sending (a 413 on the
// Content-Length of an HTTP/1.0 or HTTP/0.9-style request, before its body has arrived)
// is followed by a FIN, and what the client still sends is drained: never an RST,
// which would make a client that is still writing, or slow to read on a loaded
// machine, lose the answer (runtime/graceful-close.ts; RFC 9112 section 9.6).
import { connect, type AddressInfo, type Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpApp } from '../../runtime/http-app.ts';
import { parseResponse } from '../hostile/raw-client.ts';

const BODY = 155 * 1024;

describe('an answer that closes the connection before the body has arrived', () => {
  let app: FastifyInstance;
  let port = 0;
  beforeAll(async () => {
    ({ app } = createHttpApp({ limits: { bodyLimit: 64 * 1024 } }));
    app.post('/upload', () => ({ ok: true }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    port = (app.server.address() as AddressInfo).port;
  });
  afterAll(() => app.close());

  /** Sends the head and 1 KiB, reads the whole answer, then sends the rest of the body. */
  async function sendAfterTheAnswer(requestLine: string) {
    // Half-open, as a client still uploading is: the server's FIN does not end our side.
    const socket: Socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    const chunks: Buffer[] = [];
    const errors: string[] = [];
    let answered: () => void = () => undefined;
    const answer = new Promise<void>((resolve) => (answered = resolve));
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      if (parseResponse(Buffer.concat(chunks), false)) answered();
    });
    socket.on('error', (error: NodeJS.ErrnoException) => errors.push(error.code ?? error.message));
    const ended = new Promise<void>((resolve) => socket.once('end', resolve));
    const closed = new Promise<void>((resolve) => socket.once('close', resolve));
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    const head = `${requestLine}\r\nContent-Type: application/json\r\nContent-Length: ${BODY}\r\n\r\n`;
    socket.write(Buffer.concat([Buffer.from(head, 'latin1'), Buffer.alloc(1024, 0x20)]));
    await answer;
    // The server has answered (and closed its side); the client is still sending.
    // In pieces, each after the last was written: a socket the server destroyed answers
    // them with a reset.
    for (let sent = 1024; sent < BODY && errors.length === 0; sent += 16 * 1024) {
      await new Promise<void>((resolve) =>
        socket.write(Buffer.alloc(Math.min(16 * 1024, BODY - sent), 0x20), () => resolve()),
      );
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await ended;
    socket.end();
    await closed;
    return { response: parseResponse(Buffer.concat(chunks), false), errors };
  }

  for (const requestLine of ['POST /upload HTTP/1.0', 'POST /upload']) {
    it(`${JSON.stringify(requestLine)}: a 413 problem, then a FIN and the rest drained, no reset`, async () => {
      const { response, errors } = await sendAfterTheAnswer(requestLine);
      expect(response?.status).toBe(413);
      expect(response?.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(errors).toEqual([]);
    });
  }
});
