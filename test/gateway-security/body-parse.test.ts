import { request, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import Fastify, { type FastifyRequest } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpProblem } from '../../runtime/errors.ts';
import { parseBody, readBody } from '../../runtime/gateway/body/parse.ts';
import { problemOf } from './fixtures.ts';

const b = (text: string) => Buffer.from(text, 'utf8');

describe('parseBody', () => {
  it('empty body → null, whatever the type', () => {
    expect(parseBody(Buffer.alloc(0), 'application/json')).toBeNull();
    expect(parseBody(Buffer.alloc(0), undefined)).toBeNull();
  });

  it('JSON, with parameters and +json suffixes', () => {
    expect(parseBody(b('{"a":1,"b":[true,null]}'), 'application/json')).toEqual({
      a: 1,
      b: [true, null],
    });
    expect(parseBody(b('[1,2]'), 'Application/JSON; charset=UTF-8')).toEqual([1, 2]);
    expect(parseBody(b('{"x":"y"}'), 'application/vnd.api+json')).toEqual({ x: 'y' });
    expect(parseBody(b('"text"'), 'application/problem+json')).toBe('text');
    expect(parseBody(b('\uFEFF{"bom":true}'), 'application/json')).toEqual({ bom: true });
  });

  it('JSON in another declared charset is decoded first', () => {
    const latin1 = Buffer.from([0x7b, 0x22, 0x6e, 0x22, 0x3a, 0x22, 0xe9, 0x22, 0x7d]); // {"n":"é"}
    expect(parseBody(latin1, 'application/json; charset=iso-8859-1')).toEqual({ n: 'é' });
  });

  it('malformed JSON → 400 malformed-body without parser internals', async () => {
    for (const text of ['{"a":', '{a:1}', "{'a':1}", 'undefined', '{"a":1}}']) {
      const problem = await problemOf(() => parseBody(b(text), 'application/json'));
      expect(problem.code).toBe('HG_ERR_BODY_MALFORMED');
      expect(problem.status).toBe(400);
      expect(problem.message).toBe('The request body is not valid JSON.');
    }
  });

  it('an unknown charset → 415', async () => {
    const problem = await problemOf(() => parseBody(b('{}'), 'application/json; charset=klingon'));
    expect(problem.code).toBe('HG_ERR_UNSUPPORTED_MEDIA_TYPE');
  });

  it('form: URL decoding, repeated keys become arrays, __proto__ is just a key', () => {
    const parsed = parseBody(
      b('name=Ada+Lovelace&tag=a&tag=b&tag=c&empty=&x=%26%3D&__proto__=evil'),
      'application/x-www-form-urlencoded',
    ) as Record<string, unknown>;
    expect(parsed).toEqual({
      name: 'Ada Lovelace',
      tag: ['a', 'b', 'c'],
      empty: '',
      x: '&=',
      ['__proto__']: 'evil',
    });
    expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(JSON.parse(JSON.stringify(parsed))).toHaveProperty('__proto__', 'evil');
  });

  it('text/* → string', () => {
    expect(parseBody(b('hello\nworld'), 'text/plain')).toBe('hello\nworld');
    expect(parseBody(b('<p>hi</p>'), 'text/html; charset=utf-8')).toBe('<p>hi</p>');
    expect(parseBody(b('a,b\n1,2'), 'text/csv')).toBe('a,b\n1,2');
  });

  it('XML is kept as text (application/xml, text/xml, +xml)', () => {
    const xml = '<?xml version="1.0"?><order id="1"/>';
    expect(parseBody(b(xml), 'application/xml')).toBe(xml);
    expect(parseBody(b(xml), 'text/xml')).toBe(xml);
    expect(parseBody(b(xml), 'application/atom+xml')).toBe(xml);
  });

  it('binary: base64 with its content type; no Content-Type → octet-stream', () => {
    const bytes = Buffer.from([0, 1, 2, 250, 255]);
    expect(parseBody(bytes, 'image/png')).toEqual({
      contentType: 'image/png',
      encoding: 'base64',
      data: bytes.toString('base64'),
    });
    expect(parseBody(bytes, undefined)).toEqual({
      contentType: 'application/octet-stream',
      encoding: 'base64',
      data: 'AAEC+v8=',
    });
  });

  it('multipart → 415', async () => {
    const problem = await problemOf(() =>
      parseBody(b('--x\r\n\r\n--x--'), 'multipart/form-data; boundary=x'),
    );
    expect(problem.code).toBe('HG_ERR_UNSUPPORTED_MEDIA_TYPE');
    expect(problem.status).toBe(415);
  });
});

describe('readBody', () => {
  it('reads a stream within the limit', async () => {
    const stream = Readable.from([b('abc'), b('def')]);
    expect((await readBody(stream, 6)).toString()).toBe('abcdef');
  });

  it('rejects by Content-Length before reading a byte', async () => {
    let read = false;
    const stream = new Readable({
      read() {
        read = true;
        this.push(null);
      },
    });
    const problem = await problemOf(() => readBody(stream, 10, '11'));
    expect(problem.code).toBe('HG_ERR_BODY_TOO_LARGE');
    expect(problem.status).toBe(413);
    expect(read).toBe(false);
  });

  it('rejects a stream that grows past the limit (no Content-Length)', async () => {
    const stream = Readable.from([b('12345'), b('67890'), b('x')]);
    const problem = await problemOf(() => readBody(stream, 10));
    expect(problem.code).toBe('HG_ERR_BODY_TOO_LARGE');
  });

  it('exactly the limit is accepted', async () => {
    expect((await readBody(Readable.from([b('1234567890')]), 10, '10')).length).toBe(10);
  });

  it('passes stream errors on', async () => {
    const stream = new Readable({
      read() {
        this.destroy(new Error('socket hang up'));
      },
    });
    await expect(readBody(stream, 10)).rejects.toThrow('socket hang up');
  });
});

// The way the gateway plugs these in: one catch-all content-type parser.
describe('through a Fastify catch-all content-type parser (real HTTP)', () => {
  const app = Fastify();
  let port = 0;
  beforeAll(async () => {
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', async (req: FastifyRequest, payload: IncomingMessage) => {
      const raw = await readBody(payload, 16, req.headers['content-length']);
      return parseBody(raw, req.headers['content-type']);
    });
    app.setErrorHandler((error, _req, reply) => {
      if (error instanceof HttpProblem) {
        return reply.status(error.status).send({ code: error.code });
      }
      return reply.status(500).send({ code: 'other' });
    });
    app.post('/hook', (req) => ({ body: req.body }));
    await app.listen({ host: '127.0.0.1', port: 0 });
    port = (app.server.address() as AddressInfo).port;
  });
  afterAll(() => app.close());

  function send(
    chunks: string[],
    headers: Record<string, string>,
  ): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const req = request(
        { host: '127.0.0.1', port, method: 'POST', path: '/hook', headers },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on('error', reject);
      for (const chunk of chunks) req.write(chunk);
      req.end();
    });
  }

  it('a small JSON body is parsed', async () => {
    const res = await send(['{"a":1}'], { 'content-type': 'application/json' });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ body: { a: 1 } });
  });

  it('over the limit by Content-Length → 413', async () => {
    const body = '{"a":"' + 'x'.repeat(40) + '"}';
    const res = await send([body], {
      'content-type': 'application/json',
      'content-length': String(body.length),
    });
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toEqual({ code: 'HG_ERR_BODY_TOO_LARGE' });
  });

  it('over the limit while chunked → 413', async () => {
    const res = await send(['{"a":"', 'x'.repeat(10), 'x'.repeat(10), '"}'], {
      'content-type': 'application/json',
      'transfer-encoding': 'chunked',
    });
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toEqual({ code: 'HG_ERR_BODY_TOO_LARGE' });
  });

  it('a large chunked body far over the limit still gets its 413 (connection not reset)', async () => {
    const chunk = 'x'.repeat(64 * 1024);
    const res = await send(
      Array.from({ length: 32 }, () => chunk),
      { 'content-type': 'application/octet-stream', 'transfer-encoding': 'chunked' },
    );
    expect(res.status).toBe(413);
  });

  it('malformed JSON → 400 malformed-body', async () => {
    const res = await send(['{"a":'], { 'content-type': 'application/json' });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body)).toEqual({ code: 'HG_ERR_BODY_MALFORMED' });
  });
});
