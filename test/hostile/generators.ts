// fast-check arbitraries for hostile HTTP/1.1 requests, built as raw bytes: malformed
// request lines and methods, odd paths, huge or broken headers, bad framing, bodies
// that are deep, out of range, invalid UTF-8 or too large, and slow or cut deliveries.
import fc from 'fast-check';
import type { Delivery } from './raw-client.ts';

export interface HostileRequest {
  target: 'gateway' | 'admin';
  method: string;
  path: string;
  version: string;
  headers: [string, string][];
  body: Buffer;
  framing: 'length' | 'chunked' | 'bad-chunked' | 'wrong-length' | 'none' | 'both';
  delivery: Delivery;
}

export const OPEN_PATH = '/webhook/default_production_fuzz/open';
export const WAIT_PATH = '/webhook/default_production_fuzz/wait';
const KEYED_PATH = '/webhook/default_production_fuzz/keyed';

const nested = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);

const method = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('POST', 'GET', 'PUT', 'PATCH', 'DELETE', 'HEAD') },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      'OPTIONS',
      'GETT',
      'PROPFIND',
      'M-SEARCH',
      'TRACE',
      'CONNECT',
      'get',
      'P OST',
      '',
      'BREW',
      'SOURCE',
      'QUERY',
    ),
  },
  { weight: 1, arbitrary: fc.string({ minLength: 1, maxLength: 12 }) },
);

const pathSegment = fc.oneof(
  fc.constantFrom(
    '%ZZ',
    '%',
    '%C0%AF',
    '%00',
    '..',
    '.',
    '%2e%2e',
    '%2F',
    '',
    'ü',
    '\u00ff',
    '*',
    ';a=b',
    '%E2%82',
  ),
  fc.string({ maxLength: 8 }),
  fc.integer({ min: 400, max: 20_000 }).map((n) => 'x'.repeat(n)),
);

const path = fc.oneof(
  { weight: 5, arbitrary: fc.constantFrom(OPEN_PATH, WAIT_PATH, KEYED_PATH) },
  {
    weight: 4,
    arbitrary: fc
      .tuple(
        fc.constantFrom(OPEN_PATH, '/webhook', '/webhook/default_production_fuzz', ''),
        fc.array(pathSegment, { maxLength: 3 }),
      )
      .map(([base, rest]) => [base, ...rest].join('/')),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '*',
      'http://evil.example/webhook/default_production_fuzz/open',
      '//webhook//default_production_fuzz//open',
      '/webhook/default_production_fuzz/open?' + 'a=1&'.repeat(2000),
      '/webhook/default_production_fuzz/open#frag',
      'webhook',
    ),
  },
);

const adminPath = fc.constantFrom(
  '/api/executions',
  '/api/executions?limit=-1&status=%ZZ',
  '/api/executions?limit=99999999999999999999',
  '/api/executions/%ZZ',
  '/api/executions/' + 'x'.repeat(600),
  '/api/executions/00000000-0000-0000-0000-000000000000',
  '/api/resources/triggers/default/nope',
  '/api/analytics/summary?window=zzz',
  '/api/test-requests',
  '/healthz',
  '/nope/%ZZ',
);

const version = fc.oneof(
  { weight: 8, arbitrary: fc.constant('HTTP/1.1') },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      'HTTP/1.0',
      'HTTP/2.0',
      'HTTP/9.9',
      'HTTP/1.1 x',
      '',
      'http/1.1',
      'HTTP/1.1\0',
    ),
  },
);

const contentType = fc.constantFrom(
  'application/json',
  'application/json; charset=utf-16le',
  'application/json; charset=nope',
  'application/x-www-form-urlencoded',
  'application/xml',
  'text/plain',
  'multipart/form-data; boundary=x',
  'application/octet-stream',
  ';;;',
  'application/vnd.x+json',
);

const header: fc.Arbitrary<[string, string]> = fc.oneof(
  { weight: 4, arbitrary: contentType.map((v): [string, string] => ['Content-Type', v]) },
  {
    weight: 2,
    arbitrary: fc.constantFrom<[string, string]>(
      ['Content-Encoding', 'gzip'],
      ['Transfer-Encoding', 'gzip, chunked'],
      ['Transfer-Encoding', 'chunked, gzip'],
      ['Expect', '100-continue'],
      ['Expect', 'the-unexpected'],
      ['Idempotency-Key', ''],
      ['Idempotency-Key', 'k'.repeat(300)],
      ['X-API-Key', 'wrong'],
      ['Origin', 'null'],
      ['Host', ''],
      ['Host', 'a\u0000b'],
      ['X-Forwarded-Proto', 'https'],
      ['Content-Length', '-1'],
      ['Content-Length', '1, 2'],
      ['Content-Length', '99999999999999999999'],
      ['Upgrade', 'websocket'],
      ['Connection', 'Upgrade'],
    ),
  },
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 8_000, max: 40_000 })
      .map((n): [string, string] => ['X-Huge', 'h'.repeat(n)]),
  },
  {
    weight: 1,
    arbitrary: fc.tuple(fc.string({ minLength: 1, maxLength: 10 }), fc.string({ maxLength: 20 })),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom<[string, string]>(
      ['Bad Name', 'x'],
      ['X-Fold', 'a\r\n b'],
      ['X-Ctl', 'a\u0001b'],
      ['', 'empty-name'],
      ['X-Utf8', '\u00e9\u00ff'],
    ),
  },
);

const body = fc.oneof(
  { weight: 2, arbitrary: fc.constant(Buffer.alloc(0)) },
  { weight: 3, arbitrary: fc.json({ maxDepth: 4 }).map((j) => Buffer.from(j)) },
  { weight: 2, arbitrary: fc.integer({ min: 60, max: 20_000 }).map((d) => Buffer.from(nested(d))) },
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 60, max: 4_000 })
      .map((d) => Buffer.from('['.repeat(d) + ']'.repeat(d))),
  },
  {
    weight: 2,
    arbitrary: fc
      .constantFrom('{"total":1e309}', '{"total":-1e309}', '[1E999]', `{"n":${'9'.repeat(400)}}`)
      .map((t) => Buffer.from(t)),
  },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 256 }).map((a) => Buffer.from(a)) },
  {
    weight: 1,
    arbitrary: fc.constant(
      Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0xc3, 0x22, 0x7d]),
    ),
  },
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 1, max: 200_000 })
      .map((n) => Buffer.from(`{"s":"${'s'.repeat(n)}"}`)),
  },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 10, max: 3_000 }).map((n) => Buffer.from('a=1&'.repeat(n))),
  },
);

function chunked(data: Buffer): Buffer {
  return Buffer.concat([
    Buffer.from(`${data.length.toString(16)}\r\n`),
    data,
    Buffer.from('\r\n0\r\n\r\n'),
  ]);
}

const delivery: fc.Arbitrary<Delivery> = fc.record({
  kind: fc.oneof(
    { weight: 12, arbitrary: fc.constant<Delivery['kind']>('whole') },
    { weight: 2, arbitrary: fc.constant<Delivery['kind']>('pieces') },
    { weight: 1, arbitrary: fc.constant<Delivery['kind']>('abort') },
    { weight: 1, arbitrary: fc.constant<Delivery['kind']>('truncated') },
  ),
  pieces: fc.integer({ min: 2, max: 6 }),
  delayMs: fc.integer({ min: 0, max: 15 }),
  cut: fc.double({ min: 0, max: 0.99, noNaN: true }),
});

export const hostileRequest: fc.Arbitrary<HostileRequest> = fc
  .record({
    target: fc.constantFrom<HostileRequest['target']>(
      'gateway',
      'gateway',
      'gateway',
      'gateway',
      'admin',
    ),
    method,
    path,
    adminPath,
    version,
    headers: fc.array(header, { maxLength: 4 }),
    duplicates: fc.integer({ min: 0, max: 3 }),
    body,
    framing: fc.constantFrom<HostileRequest['framing']>(
      'length',
      'length',
      'length',
      'chunked',
      'bad-chunked',
      'wrong-length',
      'none',
      'both',
    ),
    delivery,
  })
  .map(({ adminPath: admin, duplicates, headers, ...r }) => ({
    ...r,
    path: r.target === 'admin' ? admin : r.path,
    // Duplicated headers: the first few again.
    headers: [...headers, ...headers.slice(0, duplicates)],
  }));

/** The request as bytes on the wire. */
export function toBytes(r: HostileRequest): Buffer {
  const lines = [`${r.method} ${r.path} ${r.version}`.trimEnd(), 'Host: 127.0.0.1'];
  for (const [name, value] of r.headers) lines.push(`${name}: ${value}`);
  let payload = r.body;
  switch (r.framing) {
    case 'length':
      lines.push(`Content-Length: ${r.body.length}`);
      break;
    case 'wrong-length':
      lines.push(`Content-Length: ${r.body.length + 7}`);
      break;
    case 'chunked':
      lines.push('Transfer-Encoding: chunked');
      payload = chunked(r.body);
      break;
    case 'bad-chunked':
      lines.push('Transfer-Encoding: chunked');
      payload = Buffer.concat([Buffer.from('zz\r\n'), r.body, Buffer.from('\r\n0\r\n')]);
      break;
    case 'both':
      lines.push(`Content-Length: ${r.body.length}`, 'Transfer-Encoding: chunked');
      payload = chunked(r.body);
      break;
    case 'none':
      break;
  }
  return Buffer.concat([Buffer.from(lines.join('\r\n') + '\r\n\r\n', 'latin1'), payload]);
}

/** A short printable description of a request for failure messages. */
export function describeRequest(r: HostileRequest): string {
  return JSON.stringify({
    ...r,
    path: r.path.length > 120 ? `${r.path.slice(0, 120)}…(${r.path.length})` : r.path,
    headers: r.headers.map(([n, v]) => [n, v.length > 60 ? `${v.slice(0, 60)}…(${v.length})` : v]),
    body:
      r.body.length > 80
        ? `${r.body.subarray(0, 80).toString('latin1')}…(${r.body.length})`
        : r.body.toString('latin1'),
  });
}
