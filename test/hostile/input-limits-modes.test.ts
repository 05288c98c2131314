// Regression: a JSON body nested 10,000 levels deep, or carrying 1e309, used to be
// accepted (or answered 500) and then break GET /api/executions. Both are refused with
// a 400 problem document before any work, in the embedded (in-process) mode and in the
// queued mode over Redis, and the executions API keeps answering 200. An upload the
// client aborts is logged at debug level, never as an error.
import { connect, type AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGatewayRuntime } from '../../roles/gateway.ts';
import type { Serving } from '../../roles/serving.ts';
import { eventually } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';

const PATH = '/webhook/default_production_limits/ingest';
const deep = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
const manifests = [
  workflow('limits', {
    nodes: [{ id: 'echo', type: 'transform', expression: '{ "total": body.total }' }],
  }),
  trigger('ingest', { workflowRef: { name: 'limits' }, pathSegment: 'ingest' }),
  trigger('strict', {
    workflowRef: { name: 'limits' },
    pathSegment: 'strict',
    inputLimits: { maxDepth: 4, maxKeys: 10 },
  }),
];

/** The admin listener's app where there is one, the gateway's otherwise. */
const readApi = (serving: Serving): FastifyInstance =>
  (serving as Serving & { admin?: FastifyInstance }).admin ?? serving.app;

function logCapture() {
  const lines: { level: number; msg?: string }[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) {
        lines.push(JSON.parse(line) as { level: number; msg?: string });
      }
      callback();
    },
  });
  return { lines, logger: pino({ level: 'debug' }, stream) };
}

async function expectRefusals(serving: Serving) {
  const cases = [
    [deep(10_000), 'json-too-deep'],
    [deep(4_000), 'json-too-deep'],
    ['{"total":1e309}', 'json-number-out-of-range'],
    ['{"total":-1e309}', 'json-number-out-of-range'],
  ] as const;
  for (const [payload, type] of cases) {
    const res = await serving.app.inject({
      method: 'POST',
      url: PATH,
      headers: { 'content-type': 'application/json' },
      payload,
    });
    expect(res.statusCode, type).toBe(400);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.json()).toMatchObject({
      type: `https://hookgate.dev/problems/${type}`,
      status: 400,
    });
    expect(res.body.length).toBeLessThan(1000);
  }
  const accepted = await serving.app.inject({
    method: 'POST',
    url: PATH,
    headers: { 'content-type': 'application/json' },
    payload: '{"total":1e308}',
  });
  expect(accepted.statusCode).toBe(202);
  const list = await readApi(serving).inject({ method: 'GET', url: '/api/executions' });
  expect(list.statusCode).toBe(200);
  const { executionId } = accepted.json<{ executionId: string }>();
  const one = await readApi(serving).inject({
    method: 'GET',
    url: `/api/executions/${executionId}`,
  });
  expect(one.statusCode).toBe(200);
}

/** Starts an upload of `declared` bytes, sends a tenth of it, then resets the socket. */
async function abortUpload(port: number, declared: number): Promise<void> {
  const socket = connect({ port, host: '127.0.0.1' });
  socket.on('error', () => undefined);
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(
    `POST ${PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n`,
  );
  socket.write('{"s":"' + 's'.repeat(Math.floor(declared / 10)));
  await new Promise((resolve) => setTimeout(resolve, 20));
  socket.resetAndDestroy();
}

describe('input limits in the embedded mode', () => {
  let runtime: TestRuntime;
  const logs = logCapture();

  beforeAll(async () => {
    runtime = await startRuntime({ logger: logs.logger });
    await runtime.apply('limits.yaml', manifests, ['ingest', 'strict']);
  });
  afterAll(async () => {
    await runtime?.stop();
  });

  it('refuses depth 10,000 and 1e309 with 400 problems; the executions API stays 200', async () => {
    await expectRefusals(runtime);
  });

  it('applies a trigger’s own limits, and the defaults elsewhere', async () => {
    const post = (segment: string, payload: string) =>
      runtime.app.inject({
        method: 'POST',
        url: `/webhook/default_production_limits/${segment}`,
        headers: { 'content-type': 'application/json' },
        payload,
      });
    expect((await post('ingest', deep(5))).statusCode).toBe(202);
    const tooDeep = await post('strict', deep(5));
    expect(tooDeep.statusCode).toBe(400);
    expect(tooDeep.json()).toMatchObject({
      detail: 'The JSON body is nested more than 4 levels deep.',
    });
    expect((await post('strict', deep(4))).statusCode).toBe(202);
    const keys = await post(
      'strict',
      JSON.stringify(Object.fromEntries('abcdefghijk'.split('').map((k) => [k, 1]))),
    );
    expect(keys.json()).toMatchObject({ type: 'https://hookgate.dev/problems/too-many-keys' });
  });

  it('logs aborted uploads at debug level, not as errors', async () => {
    await runtime.app.listen({ port: 0, host: '127.0.0.1' });
    const port = (runtime.app.server.address() as AddressInfo).port;
    for (let i = 0; i < 20; i++) await abortUpload(port, 50_000);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const errors = logs.lines.filter((line) => line.level >= 50);
    expect(errors).toEqual([]);
    const gone = logs.lines.filter((line) => line.msg === 'client went away');
    expect(gone.length).toBeGreaterThan(0);
    expect(gone.every((line) => line.level === 20)).toBe(true);
  });
});

describe.skipIf(!redisAvailable())('input limits in the queued mode over Redis', () => {
  let redisServer: RedisServer;
  const clients: Redis[] = [];
  let control: TestRuntime;
  let gateway: Serving;
  const redis = () => {
    const c = new Redis(redisServer.url);
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    redisServer = await startRedis();
    control = await startRuntime({ redis: redis() });
    await control.apply('limits.yaml', manifests, ['ingest', 'strict']);
    gateway = await createGatewayRuntime({ redis: redis(), baseUrl: 'http://localhost' });
    await eventually(() => expect(gateway.table.size).toBe(2));
  });
  afterAll(async () => {
    await gateway?.close();
    await control?.stop();
    for (const c of clients) c.disconnect();
    await redisServer?.stop();
  });

  it('refuses depth 10,000 and 1e309 with 400 problems; the executions API stays 200', async () => {
    await expectRefusals(gateway);
  });
});
