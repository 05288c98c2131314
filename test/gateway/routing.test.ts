// The gateway skeleton: 404, 405 with Allow, HEAD and OPTIONS, problem documents,
// and one execution per accepted request with a 202 handle.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CATALOGUE, PROBLEM_BASE } from '../../runtime/errors.ts';
import { eventually } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';

let rt: TestRuntime;
const base = '/webhook/default_production_orders';

beforeAll(async () => {
  rt = await startRuntime();
  await rt.apply(
    'orders.yaml',
    [
      workflow('orders'),
      trigger('ingest', { pathSegment: 'ingest', methods: ['POST', 'GET', 'HEAD'] }),
      trigger('items', { pathSegment: 'orders/:orderId/items/:item', methods: ['PUT'] }),
      trigger('opts', { pathSegment: 'opts', methods: ['OPTIONS'] }),
      trigger('off', { pathSegment: 'off', deploy: false }),
    ],
    ['ingest', 'items', 'opts'],
  );
});
afterAll(() => rt.stop());

function expectProblem(
  res: { statusCode: number; headers: Record<string, unknown>; json(): unknown },
  status: number,
  type: string,
) {
  expect(res.statusCode).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  const body = res.json() as Record<string, unknown>;
  expect(body).toMatchObject({ type: PROBLEM_BASE + type, status });
  expect(typeof body.title).toBe('string');
  expect(JSON.stringify(body)).not.toMatch(/at .*\.ts:\d+/); // never a stack trace
  return body;
}

describe('routing', () => {
  it('an unknown path is 404 route-not-found', async () => {
    expectProblem(
      await rt.app.inject({ method: 'POST', url: `${base}/nope` }),
      404,
      CATALOGUE.HG_ERR_ROUTE_NOT_FOUND.type,
    );
    expectProblem(
      await rt.app.inject({ method: 'POST', url: '/webhook/other_production_orders/ingest' }),
      404,
      'route-not-found',
    );
  });

  it('a path parameter up to 500 characters is served; a longer one is 414, not 404', async () => {
    const item = (length: number) => `${base}/orders/o-1/items/${'p'.repeat(length)}`;
    const served = await rt.app.inject({ method: 'PUT', url: item(500), payload: {} });
    expect(served.statusCode).toBe(202);
    expectProblem(
      await rt.app.inject({ method: 'PUT', url: item(501), payload: {} }),
      414,
      'uri-too-long',
    );
    // Measured decoded, as the router does: 300 characters sent as 900.
    const encoded = `${base}/orders/o-1/items/${'%C3%A9'.repeat(300)}`;
    expect((await rt.app.inject({ method: 'PUT', url: encoded, payload: {} })).statusCode).toBe(
      202,
    );
  });

  it('a trigger with deploy: false is not reachable (404)', async () => {
    expectProblem(
      await rt.app.inject({ method: 'POST', url: `${base}/off` }),
      404,
      'route-not-found',
    );
  });

  it('a path outside /webhook is a 404 problem too', async () => {
    expectProblem(await rt.app.inject({ method: 'GET', url: '/nothing-here' }), 404, 'not-found');
  });

  it('a method that is not enabled is 405 with Allow', async () => {
    const res = await rt.app.inject({ method: 'DELETE', url: `${base}/ingest` });
    const body = expectProblem(res, 405, 'method-not-allowed');
    expect(res.headers.allow).toBe('POST, GET, HEAD');
    expect(body.allowed).toEqual(['POST', 'GET', 'HEAD']);
  });

  it.each(['TRACE', 'PROPFIND', 'QUERY', 'SEARCH', 'LOCK', 'PURGE'])(
    'any other method Node parses (%s) is 405 with Allow on an endpoint, 404 route-not-found elsewhere',
    async (method) => {
      const res = await rt.app.inject({ method: method as 'GET', url: `${base}/ingest` });
      expectProblem(res, 405, 'method-not-allowed');
      expect(res.headers.allow).toBe('POST, GET, HEAD');
      expectProblem(
        await rt.app.inject({ method: method as 'GET', url: `${base}/nope` }),
        404,
        'route-not-found',
      );
    },
  );

  it('OPTIONS on an endpoint that serves neither OPTIONS nor CORS is 405, as its Allow says', async () => {
    const before = (await rt.engine.list({})).length;
    const res = await rt.app.inject({ method: 'OPTIONS', url: `${base}/ingest` });
    const body = expectProblem(res, 405, 'method-not-allowed');
    expect(res.headers.allow).toBe('POST, GET, HEAD');
    expect(body.allowed).toEqual(['POST', 'GET', 'HEAD']);
    expect(body.detail).toBe('OPTIONS is not enabled for this endpoint');
    expect((await rt.engine.list({})).length).toBe(before);
  });

  it('OPTIONS enabled as a method starts an execution like any other', async () => {
    const res = await rt.app.inject({ method: 'OPTIONS', url: `${base}/opts` });
    expect(res.statusCode).toBe(202);
  });

  it('a CORS preflight to an endpoint without CORS is refused (403)', async () => {
    const res = await rt.app.inject({
      method: 'OPTIONS',
      url: `${base}/ingest`,
      headers: { origin: 'https://app.example.com', 'access-control-request-method': 'POST' },
    });
    expect(res.statusCode).toBe(403);
  });

  it('HEAD answers like GET without a body', async () => {
    const res = await rt.app.inject({ method: 'HEAD', url: `${base}/ingest` });
    expect(res.statusCode).toBe(202);
    expect(res.body).toBe('');
    expect(res.headers.location).toMatch(/^\/webhook-executions\/[^/?]+\?token=/);
  });

  it('HEAD on an unknown path is 404 without a body', async () => {
    const res = await rt.app.inject({ method: 'HEAD', url: `${base}/nope` });
    expect(res.statusCode).toBe(404);
    expect(res.body).toBe('');
  });

  it('trailing slashes and query strings do not change the route', async () => {
    expect((await rt.app.inject({ method: 'POST', url: `${base}/ingest/?a=1` })).statusCode).toBe(
      202,
    );
  });
});

describe('immediate ACK', () => {
  it('each accepted request starts exactly one execution and gets 202 with a handle', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await rt.app.inject({
        method: 'POST',
        url: `${base}/ingest?source=test`,
        headers: { 'content-type': 'application/json', 'x-correlation-id': `corr-${i}` },
        payload: { n: i },
      });
      expect(res.statusCode).toBe(202);
      const body = res.json<{
        executionId: string;
        status: string;
        links: { self: string; events: string };
      }>();
      expect(body.links.self).toMatch(new RegExp(`^/webhook-executions/${body.executionId}\\?`));
      expect(res.headers['x-correlation-id']).toBe(`corr-${i}`);
      expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
      ids.push(body.executionId);
    }
    expect(new Set(ids).size).toBe(5);
    for (const [i, id] of ids.entries()) {
      const execution = await eventually(async () => {
        const e = await rt.engine.get(id);
        if (!e || e.status !== 'succeeded') throw new Error(`not done: ${e?.status}`);
        return e;
      });
      expect(execution.input.body).toEqual({ n: i });
      expect(execution.input.query).toEqual({ source: 'test' });
      expect(execution.input.metadata).toMatchObject({
        correlationId: `corr-${i}`,
        method: 'POST',
        workflowId: 'default_production_orders',
      });
      const viaApi = await rt.admin.inject({ method: 'GET', url: `/api/executions/${id}` });
      expect(viaApi.json()).toMatchObject({ id, status: 'succeeded' });
    }
    const listed = await rt.admin.inject({
      method: 'GET',
      url: `/api/executions?trigger=default/ingest&limit=1000`,
    });
    const mine = listed.json<{ items: { id: string }[] }>().items.filter((e) => ids.includes(e.id));
    expect(mine).toHaveLength(5);
  });

  it('the query string reaches the execution: repeated keys as arrays, __proto__ as a key', async () => {
    const ids: string[] = [];
    for (const url of [`${base}/ingest`, `${base}/ingest?a=1&b=x&a=2&__proto__=p&__proto__=q`]) {
      const res = await rt.app.inject({ method: 'POST', url });
      expect(res.statusCode).toBe(202);
      ids.push(res.json<{ executionId: string }>().executionId);
    }
    const [plain, repeated] = await Promise.all(
      ids.map((id) =>
        eventually(async () => (await rt.engine.get(id)) ?? Promise.reject(new Error('missing'))),
      ),
    );
    expect(plain?.input.query).toEqual({});
    const query = repeated?.input.query as Record<string, unknown>;
    expect(Object.getPrototypeOf(query)).toBe(Object.prototype);
    expect(Object.entries(query)).toEqual([
      ['a', ['1', '2']],
      ['b', 'x'],
      ['__proto__', ['p', 'q']],
    ]);
    expect(repeated?.input.metadata.path).toBe(`${base}/ingest`);
  });

  it('path parameters reach the execution', async () => {
    const res = await rt.app.inject({ method: 'PUT', url: `${base}/orders/A-17/items/3` });
    expect(res.statusCode).toBe(202);
    const id = res.json<{ executionId: string }>().executionId;
    const e = await eventually(
      async () => (await rt.engine.get(id)) ?? Promise.reject(new Error('missing')),
    );
    expect(e.input.params).toEqual({ orderId: 'A-17', item: '3' });
  });

  it('an unpublished workflow answers 404 workflow-not-found', async () => {
    await rt.apply('drafts.yaml', [
      workflow('drafts', { publish: false }),
      trigger('draft', { workflowRef: { name: 'drafts' } }),
    ]);
    await eventually(async () => {
      const res = await rt.app.inject({
        method: 'POST',
        url: '/webhook/default_production_drafts/default',
      });
      expectProblem(res, 404, 'workflow-not-found');
    });
  });

  it('bad execution filters are 400 problems', async () => {
    for (const q of ['status=weird', 'limit=0', 'limit=abc', 'since=yesterday', 'triggerKey=x']) {
      expectProblem(
        await rt.admin.inject({ method: 'GET', url: `/api/executions?${q}` }),
        400,
        'invalid-parameter',
      );
    }
    expectProblem(
      await rt.admin.inject({ method: 'GET', url: '/api/executions/nope' }),
      404,
      'execution-not-found',
    );
  });
});

describe('Send Test Request', () => {
  it('sends one request through the gateway with the saved credentials and returns the answer', async () => {
    await rt.apply(
      'tested.yaml',
      [
        {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: 'tk' },
          stringData: { acme: 'key-for-tests-1' },
        },
        workflow('tested', {
          nodes: [
            {
              id: 'out',
              type: 'transform',
              expression: '{ "got": body, "who": metadata.consumer, "id": params.id }',
            },
          ],
        }),
        trigger('tested', {
          workflowRef: { name: 'tested' },
          pathSegment: 'items/:id',
          auth: { method: 'apiKey', apiKey: { secretRef: { name: 'tk' } } },
          testCredentials: { type: 'apiKey', secretRef: { name: 'tk', key: 'acme' } },
          response: { mode: 'waitForCompletion' },
        }),
        trigger('untested', {
          workflowRef: { name: 'tested' },
          pathSegment: 'bare',
          auth: { method: 'apiKey', apiKey: { secretRef: { name: 'tk' } } },
        }),
      ],
      ['tested', 'untested'],
    );
    const res = await rt.admin.inject({
      method: 'POST',
      url: '/api/triggers/default/tested/test',
      payload: { body: { hello: 1 }, params: { id: 'A-9' } },
    });
    expect(res.statusCode).toBe(200);
    const out = res.json<{
      request: { url: string; headers: Record<string, string> };
      response: { statusCode: number; body: unknown };
    }>();
    expect(out.response).toMatchObject({
      statusCode: 200,
      body: { got: { hello: 1 }, who: 'acme', id: 'A-9' },
    });
    expect(out.request.url).toBe('/webhook/default_production_tested/items/A-9');
    expect(out.request.headers['x-api-key']).toBe('[redacted]');
  });

  it('sends a body with the first method that carries one, and refuses a body with GET', async () => {
    await rt.apply(
      'methods.yaml',
      [
        workflow('echo-method', {
          nodes: [
            { id: 'out', type: 'transform', expression: '{ "m": metadata.method, "got": body }' },
          ],
        }),
        trigger('getfirst', {
          workflowRef: { name: 'echo-method' },
          pathSegment: 'getfirst',
          methods: ['GET', 'POST'],
          response: { mode: 'waitForCompletion' },
        }),
        trigger('getonly', {
          workflowRef: { name: 'echo-method' },
          pathSegment: 'getonly',
          methods: ['GET'],
          response: { mode: 'waitForCompletion' },
        }),
      ],
      ['getfirst', 'getonly'],
    );
    const test = (name: string, payload: object) =>
      rt.admin.inject({ method: 'POST', url: `/api/triggers/default/${name}/test`, payload });
    const sent = await test('getfirst', { body: { a: 1 } });
    expect(sent.statusCode).toBe(200);
    expect(sent.json()).toMatchObject({
      request: { method: 'POST' },
      response: { statusCode: 200, body: { m: 'POST', got: { a: 1 } } },
    });
    const bodiless = await test('getfirst', {});
    expect(bodiless.json()).toMatchObject({ request: { method: 'GET' } });
    for (const [name, payload] of [
      ['getfirst', { method: 'GET', body: { a: 1 } }],
      ['getonly', { body: { a: 1 } }],
    ] as const) {
      const refused = await test(name, payload);
      expect(refused.statusCode).toBe(400);
      expect(refused.json()).toMatchObject({ errors: [{ pointer: '/body' }] });
    }
  });

  it('takes header names in any case, as a network request would; refuses what no client could send', async () => {
    const test = (headers: Record<string, string>) =>
      rt.admin.inject({
        method: 'POST',
        url: '/api/triggers/default/getfirst/test',
        payload: { body: { a: 1 }, headers },
      });
    // Content-Type, not content-type: it used to sit beside the default and lose to it.
    const sent = await test({ 'Content-Type': 'text/plain' });
    expect(sent.statusCode).toBe(200);
    expect(sent.json()).toMatchObject({
      request: { headers: { 'content-type': 'text/plain' } },
      response: { statusCode: 200, body: { got: '{"a":1}' } },
    });
    expect(Object.keys(sent.json<{ request: { headers: object } }>().request.headers)).toEqual([
      'content-type',
    ]);
    for (const [headers, pointer] of [
      [{ 'X-Trace': 'a\r\nX-Evil: 1' }, '/headers/X-Trace'],
      [{ 'x-trace': 'a\u0000b' }, '/headers/x-trace'],
      [{ 'x trace': '1' }, '/headers/x trace'],
      [{ '': '1' }, '/headers/'],
      [{ 'X-Trace': '1', 'x-trace': '2' }, '/headers/x-trace'],
    ] as const) {
      const refused = await test(headers);
      expect(refused.statusCode).toBe(400);
      expect(refused.json()).toMatchObject({
        type: `${PROBLEM_BASE}invalid-parameter`,
        errors: [{ pointer }],
      });
    }
  });

  it('fills a path parameter named like an Object.prototype member from the given params only', async () => {
    await rt.apply(
      'proto-params.yaml',
      [
        workflow('proto-params', {
          nodes: [{ id: 'out', type: 'transform', expression: '{ "p": params }' }],
        }),
        trigger('proto-params', {
          workflowRef: { name: 'proto-params' },
          pathSegment: 'p/:constructor/:toString',
          response: { mode: 'waitForCompletion' },
        }),
      ],
      ['proto-params'],
    );
    const res = await rt.admin.inject({
      method: 'POST',
      url: '/api/triggers/default/proto-params/test',
      payload: { body: {}, params: { constructor: 'c' } },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      request: { url: '/webhook/default_production_proto-params/p/c/test' },
      response: { statusCode: 200, body: { p: { constructor: 'c', toString: 'test' } } },
    });
  });

  it('is refused with a clear error when no credentials are saved', async () => {
    const res = await rt.admin.inject({
      method: 'POST',
      url: '/api/triggers/default/untested/test',
      payload: {},
    });
    expect(res.statusCode).toBe(409);
    expect(res.json<{ type: string; detail: string }>()).toMatchObject({
      type: `${PROBLEM_BASE}test-credentials-missing`,
      detail: expect.stringContaining('spec.testCredentials'),
    });
  });

  it('reaches an endpoint that requires HTTPS (the in-process hop is not a network), which a forged mark cannot', async () => {
    await rt.apply(
      'secure.yaml',
      [
        workflow('secure', {
          nodes: [{ id: 'out', type: 'transform', expression: '{ "headers": headers }' }],
        }),
        trigger('secure', {
          workflowRef: { name: 'secure' },
          pathSegment: 'secure',
          requireHttps: true,
          response: { mode: 'waitForCompletion' },
        }),
      ],
      ['secure'],
    );
    const res = await rt.admin.inject({
      method: 'POST',
      url: '/api/triggers/default/secure/test',
      payload: { body: {}, headers: { 'x-hookgate-in-process-test': 'forged-by-the-caller' } },
    });
    const out = res.json<{ response: { statusCode: number; body: { headers: object } } }>();
    expect(out.response.statusCode).toBe(200);
    // The mark never reaches the workflow.
    expect(Object.keys(out.response.body.headers)).not.toContain('x-hookgate-in-process-test');
    const path = res.json<{ request: { url: string } }>().request.url;
    // Over the network (plain HTTP), with or without a forged mark: 403 https-required.
    for (const headers of [{}, { 'x-hookgate-in-process-test': 'a'.repeat(64) }]) {
      const direct = await rt.app.inject({ method: 'POST', url: path, headers, payload: {} });
      expect(direct.statusCode).toBe(403);
      expect(direct.json<{ type: string }>().type).toBe(`${PROBLEM_BASE}https-required`);
    }
  });

  it('rejects a malformed test request and an undeployed trigger', async () => {
    expect(
      (
        await rt.admin.inject({
          method: 'POST',
          url: '/api/triggers/default/tested/test',
          payload: { method: 'FETCH' },
        })
      ).statusCode,
    ).toBe(400);
    expect(
      (
        await rt.admin.inject({
          method: 'POST',
          url: '/api/triggers/default/ghost/test',
          payload: {},
        })
      ).statusCode,
    ).toBe(404);
  });
});
