// Every protection of the request path, end to end through the gateway, and every row
// of the spec's Errors table. Unit tests of each module live in test/gateway-security.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROBLEM_BASE } from '../../runtime/errors.ts';
import { eventually } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { secret, trigger, workflow } from '../support/manifests.ts';

let rt: TestRuntime;
const echo = '/webhook/default_production_echo';

type Res = { statusCode: number; headers: Record<string, unknown>; body: string; json(): unknown };
function problem(res: Res, status: number, type: string): Record<string, unknown> {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  const body = res.json() as Record<string, unknown>;
  expect(body.type).toBe(PROBLEM_BASE + type);
  expect(res.body).not.toMatch(/\.ts:\d+|node_modules|Error:/);
  return body;
}

beforeAll(async () => {
  rt = await startRuntime({ guards: { trustedProxies: ['10.0.0.0/8'] } });
  const keys = { method: 'apiKey', apiKey: { secretRef: { name: 'keys' } } };
  await rt.apply(
    'all.yaml',
    [
      secret('keys', { acme: 'key-acme-123456', globex: 'key-globex-1' }),
      workflow('echo', {
        nodes: [
          {
            id: 'out',
            type: 'transform',
            expression: '{ "got": body, "consumer": metadata.consumer }',
          },
        ],
      }),
      workflow('slow', {
        nodes: [
          { id: 'wait', type: 'delay', duration: '1500ms' },
          { id: 'done', type: 'transform', expression: '"late"' },
        ],
      }),
      workflow('broken', {
        nodes: [{ id: 'boom', type: 'fail', expression: '"the ledger is closed"' }],
      }),
      workflow('badexpr', {
        nodes: [{ id: 'oops', type: 'transform', expression: '$number("x") + $undefinedFn()' }],
      }),
      trigger('keyed', {
        workflowRef: { name: 'echo' },
        pathSegment: 'keyed',
        auth: keys,
        response: { mode: 'waitForCompletion' },
      }),
      trigger('limited', {
        workflowRef: { name: 'echo' },
        pathSegment: 'limited',
        rateLimit: { requestsPerMinute: 10 },
      }),
      trigger('secure', {
        workflowRef: { name: 'echo' },
        pathSegment: 'secure',
        requireHttps: true,
      }),
      trigger('browser', {
        workflowRef: { name: 'echo' },
        pathSegment: 'browser',
        cors: {
          enabled: true,
          allowedOrigins: ['https://app.example.com'],
          allowCredentials: true,
          allowedHeaders: ['Content-Type'],
        },
      }),
      trigger('strict', {
        workflowRef: { name: 'echo' },
        pathSegment: 'strict',
        maxBodyBytes: 256,
        schema: {
          mode: 'manual',
          input: {
            fields: [
              { name: 'orderId', type: 'string', required: true },
              { name: 'total', type: 'number', required: true },
              { name: 'count', type: 'integer' },
              { name: 'vip', type: 'boolean' },
              { name: 'tags', type: 'array' },
              { name: 'meta', type: 'object' },
            ],
          },
        },
      }),
      trigger('waiting', {
        workflowRef: { name: 'echo' },
        pathSegment: 'waiting',
        response: { mode: 'waitForCompletion' },
      }),
      trigger('empty', {
        workflowRef: { name: 'echo' },
        pathSegment: 'empty',
        response: { mode: 'waitForCompletion', statusCode: 204 },
      }),
      trigger('slowpoke', {
        workflowRef: { name: 'slow' },
        pathSegment: 'slowpoke',
        timeout: '1s',
        response: { mode: 'waitForCompletion' },
      }),
      trigger('failing', {
        workflowRef: { name: 'broken' },
        pathSegment: 'failing',
        response: { mode: 'waitForCompletion' },
      }),
      trigger('faulty', {
        workflowRef: { name: 'badexpr' },
        pathSegment: 'faulty',
        response: { mode: 'waitForCompletion' },
      }),
    ],
    [
      'keyed',
      'limited',
      'secure',
      'browser',
      'strict',
      'waiting',
      'empty',
      'slowpoke',
      'failing',
      'faulty',
    ],
  );
});
afterAll(() => rt.stop());

const json = { 'content-type': 'application/json' };

describe('401 / 403: authentication', () => {
  const url = '/webhook/default_production_echo/keyed';
  it('accepts the right key and names the consumer', async () => {
    const res = await rt.app.inject({
      method: 'POST',
      url,
      headers: { ...json, 'x-api-key': 'key-acme-123456' },
      payload: { a: 1 },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ got: { a: 1 }, consumer: 'acme' });
  });
  it('missing credentials → 401 with WWW-Authenticate', async () => {
    const res = await rt.app.inject({ method: 'POST', url, headers: json, payload: {} });
    problem(res, 401, 'credentials-missing');
    expect(res.headers['www-authenticate']).toBeDefined();
  });
  it('wrong key, wrong-length key, key in another header → 401, never 500', async () => {
    for (const headers of [
      { 'x-api-key': 'key-acme-123457' },
      { 'x-api-key': 'k' },
      { 'x-api-key': 'x'.repeat(5000) },
    ]) {
      problem(
        await rt.app.inject({ method: 'POST', url, headers: { ...json, ...headers }, payload: {} }),
        401,
        'credentials-invalid',
      );
    }
    problem(
      await rt.app.inject({
        method: 'POST',
        url,
        headers: { ...json, 'x-api-token': 'key-acme-123456' },
        payload: {},
      }),
      401,
      'credentials-missing',
    );
  });
  it('the credentials never reach the workflow or the stored execution', async () => {
    await rt.app.inject({
      method: 'POST',
      url,
      headers: { ...json, 'x-api-key': 'key-acme-123456', cookie: 's=1' },
      payload: { b: 2 },
    });
    const [latest] = await rt.engine.list({ triggerKey: 'default/keyed', limit: 1 });
    expect(latest?.input.headers['x-api-key']).toBe('[redacted]');
    expect(latest?.input.headers.cookie).toBe('[redacted]');
    expect(latest?.input.metadata.consumer).toBe('acme');
    const listed = await rt.admin.inject({
      method: 'GET',
      url: '/api/executions?trigger=default/keyed',
    });
    expect(listed.body).not.toContain('key-acme-123456');
  });

  it('the body of an unauthenticated request is never read', async () => {
    const res = await rt.app.inject({ method: 'POST', url, headers: json, payload: '{not json' });
    problem(res, 401, 'credentials-missing');
  });
});

describe('403: HTTPS required', () => {
  const url = `${echo}/secure`;
  it('plain HTTP is refused', async () => {
    problem(await rt.app.inject({ method: 'POST', url }), 403, 'https-required');
  });
  it('X-Forwarded-Proto from an untrusted address is ignored', async () => {
    problem(
      await rt.app.inject({
        method: 'POST',
        url,
        remoteAddress: '192.0.2.7',
        headers: { 'x-forwarded-proto': 'https' },
      }),
      403,
      'https-required',
    );
  });
  it('X-Forwarded-Proto: https from a trusted proxy is accepted', async () => {
    const res = await rt.app.inject({
      method: 'POST',
      url,
      remoteAddress: '10.1.2.3',
      headers: { 'x-forwarded-proto': 'https' },
    });
    expect(res.statusCode).toBe(202);
  });
});

describe('403: CORS', () => {
  const url = `${echo}/browser`;
  it('an allowed origin gets its own origin back, credentials, and Vary: Origin', async () => {
    const res = await rt.app.inject({
      method: 'POST',
      url,
      headers: { origin: 'https://app.example.com' },
    });
    expect(res.statusCode).toBe(202);
    expect(res.headers['access-control-allow-origin']).toBe('https://app.example.com');
    expect(res.headers['access-control-allow-credentials']).toBe('true');
    expect(String(res.headers.vary)).toMatch(/Origin/);
  });
  it('an error to an allowed origin carries the CORS headers too; Allow lists what is served', async () => {
    const res = await rt.app.inject({
      method: 'DELETE',
      url,
      headers: { origin: 'https://app.example.com' },
    });
    problem(res, 405, 'method-not-allowed');
    expect(res.headers['access-control-allow-origin']).toBe('https://app.example.com');
    expect(res.headers['access-control-allow-credentials']).toBe('true');
    expect(String(res.headers.vary)).toMatch(/Origin/);
    // POST is served, and OPTIONS (CORS is on: preflights are answered).
    expect(res.headers.allow).toBe('POST, OPTIONS');
  });
  it('a bare OPTIONS (no preflight) to a CORS endpoint: 204 with Allow, nothing starts', async () => {
    const before = (await rt.engine.list({ triggerKey: 'default/browser', limit: 1000 })).length;
    const res = await rt.app.inject({ method: 'OPTIONS', url });
    expect(res.statusCode).toBe(204);
    expect(res.headers.allow).toBe('POST, OPTIONS');
    expect(res.body).toBe('');
    expect((await rt.engine.list({ triggerKey: 'default/browser', limit: 1000 })).length).toBe(
      before,
    );
  });
  it('a 405 to a refused origin carries no CORS grant', async () => {
    const res = await rt.app.inject({
      method: 'DELETE',
      url,
      headers: { origin: 'https://evil.example.net' },
    });
    expect(res.statusCode).toBe(405);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });
  it('a preflight lists the enabled methods and allowed headers', async () => {
    const res = await rt.app.inject({
      method: 'OPTIONS',
      url,
      headers: {
        origin: 'https://app.example.com',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type',
      },
    });
    expect(res.statusCode).toBe(204);
    expect(res.headers['access-control-allow-methods']).toBe('POST');
    expect(String(res.headers['access-control-allow-headers'])).toMatch(/content-type/i);
    expect((await rt.engine.list({ triggerKey: 'default/browser' })).length).toBeLessThanOrEqual(1);
  });
  it.each([
    ['an evil origin', 'https://evil.example.net'],
    ['the null origin', 'null'],
    ['a suffix trick', 'https://evilapp.example.com'],
    ['a prefix trick', 'https://app.example.com.evil.net'],
  ])('%s is refused, and no execution starts', async (_n, origin) => {
    const before = (await rt.engine.list({ triggerKey: 'default/browser', limit: 1000 })).length;
    const res = await rt.app.inject({ method: 'POST', url, headers: { origin } });
    problem(res, 403, 'cors-origin-denied');
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
    expect((await rt.engine.list({ triggerKey: 'default/browser', limit: 1000 })).length).toBe(
      before,
    );
  });
  it('a browser call to an endpoint without CORS is refused', async () => {
    problem(
      await rt.app.inject({
        method: 'POST',
        url: `${echo}/waiting`,
        headers: { origin: 'https://app.example.com' },
      }),
      403,
      'cors-origin-denied',
    );
  });
});

describe('429: rate limit', () => {
  it('admits exactly the limit out of many concurrent requests, with Retry-After on the rest', async () => {
    const results = await Promise.all(
      Array.from({ length: 40 }, () => rt.app.inject({ method: 'POST', url: `${echo}/limited` })),
    );
    const ok = results.filter((r) => r.statusCode === 202);
    const limited = results.filter((r) => r.statusCode === 429);
    expect(ok).toHaveLength(10);
    expect(limited).toHaveLength(30);
    for (const r of limited) {
      problem(r, 429, 'rate-limited');
      expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
    }
    expect(ok[0]?.headers['ratelimit-limit']).toBe('10');
  });
});

describe('400 / 413 / 422: bodies and schemas', () => {
  const url = `${echo}/strict`;
  it('a valid body passes', async () => {
    const res = await rt.app.inject({
      method: 'POST',
      url,
      headers: json,
      payload: { orderId: 'A', total: 3, count: 2, vip: true, tags: [], meta: {} },
    });
    expect(res.statusCode).toBe(202);
  });
  it('malformed JSON → 400', async () => {
    problem(
      await rt.app.inject({ method: 'POST', url, headers: json, payload: '{"orderId": ' }),
      400,
      'malformed-body',
    );
  });
  it('over the limit by Content-Length → 413', async () => {
    problem(
      await rt.app.inject({
        method: 'POST',
        url,
        headers: json,
        payload: JSON.stringify({ orderId: 'x'.repeat(400), total: 1 }),
      }),
      413,
      'body-too-large',
    );
  });
  it('over the limit in a chunked body → 413', async () => {
    const address = await rt.app.listen({ port: 0, host: '127.0.0.1' });
    const chunk = new TextEncoder().encode('x'.repeat(100));
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        controller.enqueue(chunk);
        if ((this as { n?: number }).n === undefined) (this as { n?: number }).n = 0;
        if (++(this as { n: number }).n >= 5) controller.close();
      },
    });
    const res = await fetch(`${address}${url}`, {
      method: 'POST',
      body,
      headers: json,
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(((await res.json()) as { type: string }).type).toBe(`${PROBLEM_BASE}body-too-large`);
  });
  it('every kind of schema violation → 422 listing each with a JSON Pointer', async () => {
    const res = await rt.app.inject({
      method: 'POST',
      url,
      headers: json,
      payload: { total: 'ten', count: 1.5, vip: 'yes', tags: {}, meta: [] },
    });
    const body = problem(res, 422, 'schema-validation-failed');
    const pointers = (body.errors as { pointer: string }[]).map((e) => e.pointer).sort();
    expect(pointers).toEqual(['/count', '/meta', '/orderId', '/tags', '/total', '/vip']);
  });
  it('a non-object body against an object schema → 422 at the root', async () => {
    const body = problem(
      await rt.app.inject({ method: 'POST', url, headers: json, payload: '[1,2]' }),
      422,
      'schema-validation-failed',
    );
    expect((body.errors as { pointer: string }[])[0]?.pointer).toBe('');
  });
  it('JSON text sent as a form (curl -d without a Content-Type) → 422 that says how it was read', async () => {
    const payload = '{"orderId":"A1","total":10}';
    const form = problem(
      await rt.app.inject({
        method: 'POST',
        url,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload,
      }),
      422,
      'schema-validation-failed',
    );
    expect(form.detail).toBe(
      'The request body does not match the input schema (2 problems). The body was read as ' +
        'application/x-www-form-urlencoded (its Content-Type), not as JSON; a JSON body ' +
        'needs Content-Type: application/json.',
    );
    const text = problem(
      await rt.app.inject({
        method: 'POST',
        url,
        headers: { 'content-type': 'text/plain' },
        payload,
      }),
      422,
      'schema-validation-failed',
    );
    expect(text.detail).toContain('read as text/plain (its Content-Type), not as JSON');
    // A JSON body that breaks the schema is not told about its Content-Type.
    const asJson = problem(
      await rt.app.inject({ method: 'POST', url, headers: json, payload: '{}' }),
      422,
      'schema-validation-failed',
    );
    expect(asJson.detail).toBe('The request body does not match the input schema (2 problems).');
  });
  it('a +json type outside application/ is read as JSON: its 422 does not say otherwise', async () => {
    // The body parser reads every */*+json as JSON (parse.ts), model/gltf+json included.
    for (const type of ['model/gltf+json', 'application/vnd.api+json; charset=utf-8']) {
      const answer = problem(
        await rt.app.inject({
          method: 'POST',
          url,
          headers: { 'content-type': type },
          payload: '{"orderId":"A1"}',
        }),
        422,
        'schema-validation-failed',
      );
      expect(answer.detail, type).toBe(
        'The request body does not match the input schema (1 problem).',
      );
    }
  });
});

describe('408 / 500 / 204: responses', () => {
  it('wait for completion returns the output with the configured headers', async () => {
    const res = await rt.app.inject({
      method: 'POST',
      url: `${echo}/waiting`,
      headers: json,
      payload: { x: 1 },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ got: { x: 1 } });
    expect(res.headers['x-request-id']).toBeDefined();
  });
  it('204 sends no body even when the workflow produces one', async () => {
    const res = await rt.app.inject({
      method: 'POST',
      url: `${echo}/empty`,
      headers: json,
      payload: { x: 1 },
    });
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');
  });
  it('a workflow slower than the timeout → 408 with a handle; the run goes on and finishes', async () => {
    const res = await rt.app.inject({
      method: 'POST',
      url: '/webhook/default_production_slow/slowpoke',
    });
    const body = problem(res, 408, 'request-timeout');
    const id = body.executionId as string;
    const links = body.links as { self: string; events: string };
    expect(links.self).toMatch(new RegExp(`^/webhook-executions/${id}\\?token=`));
    expect(links.events).toMatch(new RegExp(`^/webhook-executions/${id}/events\\?token=`));
    expect(res.headers.location).toBe(links.self);
    const done = await eventually(async () => {
      const e = await rt.engine.get(id);
      if (e?.status !== 'succeeded') throw new Error(String(e?.status));
      return e;
    });
    expect(done.output).toBe('late');
  });
  it('a failing workflow → 500 execution-failed with the reason and the execution id', async () => {
    const body = problem(
      await rt.app.inject({ method: 'POST', url: '/webhook/default_production_broken/failing' }),
      500,
      'execution-failed',
    );
    expect(body.detail).toContain('the ledger is closed');
    expect(typeof body.executionId).toBe('string');
  });
  it('a faulty node configuration → 500 execution-failed, no stack trace', async () => {
    const body = problem(
      await rt.app.inject({ method: 'POST', url: '/webhook/default_production_badexpr/faulty' }),
      500,
      'execution-failed',
    );
    expect(body.nodeId).toBe('oops');
  });
});
