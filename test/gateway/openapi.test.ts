// OpenAPI 3.1 documents on the admin listener (runtime/openapi, runtime/read-api/
// openapi-routes.ts): every example trigger's document and the gateway's pass a
// maintained OpenAPI validator, their schemas compile as JSON Schema 2020-12, real
// answers of the gateway match what the documents say, and reading a document takes
// the same access as reading the trigger.
//
// The documents are walked as untyped JSON (`any`): each step is asserted on anyway.
/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-argument, @typescript-eslint/no-unsafe-call */
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WebhookTriggerSpec } from '../../api/v1alpha1/webhook-trigger.ts';
import { AdminAccess, type AdminAuthenticator } from '../../runtime/admin/access.ts';
import { problemsOf, triggerDocument } from '../../runtime/openapi/document.ts';
import { startReceiver, type Receiver } from '../engine/receiver.ts';
import { eventually } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';

const EXAMPLES = join(import.meta.dirname, '..', '..', 'examples');
const EXAMPLE_TRIGGERS = [
  'hello',
  'inventory-sync',
  'orders-ingest',
  'payments-notify',
  'reports-stream',
  'reports-async',
  'github-events',
  'billing-events',
];

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- walking documents in assertions

let rt: TestRuntime;
let admin: string;
let webhooks: string;
/** Where reports-async's callbacks go (the outbound policy lets the engine reach it). */
let receiver: Receiver;

async function documentOf(path: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${admin}${path}`, { headers });
  return { status: res.status, body: (await res.json()) as Json };
}

async function validOpenApi(doc: unknown): Promise<void> {
  const validator = new Validator();
  const result = await validator.validate(doc as Parameters<Validator['validate']>[0]);
  expect(result.errors ?? []).toEqual([]);
  expect(result.valid).toBe(true);
  expect(validator.version).toBe('3.1');
}

/** A JSON Schema 2020-12 validator over the document's components, for `$ref`s into it. */
function schemaValidator(doc: Json, schema: unknown) {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addSchema({ $id: 'doc', components: doc.components }, 'doc');
  const rewrite = (value: unknown): unknown =>
    JSON.parse(JSON.stringify(value).replaceAll('"#/components/', '"doc#/components/'));
  return ajv.compile(rewrite(schema) as object);
}

beforeAll(async () => {
  receiver = await startReceiver(() => ({ status: 204 }));
  rt = await startRuntime({
    dir: EXAMPLES,
    baseUrl: 'https://hooks.example.com',
    engine: { outbound: { allow: [`127.0.0.1:${receiver.port}`] } },
  });
  await eventually(() => expect(rt.table.size).toBe(EXAMPLE_TRIGGERS.length), 30_000);
  admin = await rt.admin.listen({ port: 0, host: '127.0.0.1' });
  webhooks = await rt.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await rt?.stop();
  await receiver?.close();
});

describe('the document of each example trigger', () => {
  it.each(EXAMPLE_TRIGGERS)('%s is a valid OpenAPI 3.1 document', async (name) => {
    const { status, body } = await documentOf(`/api/triggers/default/${name}/openapi.json`);
    expect(status).toBe(200);
    expect(body.openapi).toBe('3.1.0');
    expect(body.servers).toEqual([{ url: 'https://hooks.example.com' }]);
    await validOpenApi(body);
    for (const schema of Object.values(body.components.schemas as Json))
      expect(() => schemaValidator(body, schema)).not.toThrow();
  });

  it('orders-ingest: API key header, manual input fields, waitForCompletion 200 with 408 and 422', async () => {
    const { body } = await documentOf('/api/triggers/default/orders-ingest/openapi.json');
    const [path, item] = Object.entries(body.paths as Json)[0] as [string, Json];
    expect(path).toBe('/webhook/default_production_orders/ingest');
    expect(body.components.securitySchemes).toEqual({
      apiKey: expect.objectContaining({ type: 'apiKey', in: 'header', name: 'X-API-Key' }),
    });
    const post = item.post as Json;
    expect(post.security).toEqual([{ apiKey: [] }]);
    expect(post.requestBody.content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/Input',
    });
    expect(body.components.schemas.Input).toMatchObject({
      type: 'object',
      required: expect.arrayContaining(['orderId']),
    });
    expect(Object.keys(post.responses)).toEqual(
      expect.arrayContaining(['200', '400', '401', '408', '413', '415', '422', '500', '503']),
    );
    expect(post.responses['401'].content['application/problem+json'].schema.allOf[1]).toEqual({
      properties: {
        type: {
          enum: [
            'https://hookgate.dev/problems/credentials-missing',
            'https://hookgate.dev/problems/credentials-invalid',
          ],
        },
      },
    });
    expect(post.responses['429']).toBeDefined();
    // A waiting caller gets the problem its execution failed with (response-modes.ts).
    expect(
      post.responses['500'].content['application/problem+json'].schema.allOf[1].properties.type
        .enum,
    ).toEqual(
      expect.arrayContaining([
        'https://hookgate.dev/problems/execution-failed',
        'https://hookgate.dev/problems/outbound-refused',
        'https://hookgate.dev/problems/trigger-recreated',
      ]),
    );
    const hello = await documentOf('/api/triggers/default/hello/openapi.json');
    const helloPost = (Object.values(hello.body.paths as Json)[0] as Json).post as Json;
    expect(helloPost.security).toBeUndefined();
    expect(helloPost.responses['401']).toBeUndefined();
    expect(helloPost.responses['429']).toBeUndefined();
  });

  it('payments-notify: a path parameter and a bearer JWT scheme', async () => {
    const { body } = await documentOf('/api/triggers/default/payments-notify/openapi.json');
    const [path, item] = Object.entries(body.paths as Json)[0] as [string, Json];
    expect(path).toBe('/webhook/default_staging_payments/notify/{provider}');
    expect(item.parameters).toEqual([
      expect.objectContaining({ name: 'provider', in: 'path', required: true }),
    ]);
    expect(body.components.securitySchemes.bearer).toMatchObject({
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'JWT',
    });
    expect(item.post.responses.default).toBeDefined();
  });

  it('inventory-sync: OAuth 2.0 with its scopes, 403 for https, scope and CORS, 202 acknowledged', async () => {
    const { body } = await documentOf('/api/triggers/default/inventory-sync/openapi.json');
    const item = Object.values(body.paths as Json)[0] as Json;
    expect(Object.keys(item)).toEqual(expect.arrayContaining(['post', 'put']));
    expect(body.components.securitySchemes.oauth2).toMatchObject({
      type: 'oauth2',
      flows: { clientCredentials: { scopes: { 'inventory:write': expect.any(String) } } },
    });
    expect(item.post.security).toEqual([{ oauth2: ['inventory:write'] }]);
    const forbidden = item.post.responses['403'].content['application/problem+json'].schema;
    expect(forbidden.allOf[1].properties.type.enum).toEqual([
      'https://hookgate.dev/problems/https-required',
      'https://hookgate.dev/problems/insufficient-scope',
      'https://hookgate.dev/problems/cors-origin-denied',
    ]);
    // Introspection: the provider down, or the route's calls all in flight (ADR 43).
    const unavailable = item.post.responses['503'].content['application/problem+json'].schema;
    expect(unavailable.allOf[1].properties.type.enum).toEqual(
      expect.arrayContaining([
        'https://hookgate.dev/problems/auth-unavailable',
        'https://hookgate.dev/problems/auth-overloaded',
      ]),
    );
    expect(body.components.schemas.Accepted.properties.channel).toBeDefined();
  });

  it('reports: an event stream, and a callback URL header and query parameter', async () => {
    const stream = await documentOf('/api/triggers/default/reports-stream/openapi.json');
    const streamPost = (Object.values(stream.body.paths as Json)[0] as Json).post as Json;
    expect(Object.keys(streamPost.responses['200'].content)).toEqual(['text/event-stream']);
    // The process has its cap of open streams: refused before the execution starts.
    const full = streamPost.responses['503'].content['application/problem+json'].schema;
    expect(full.allOf[1].properties.type.enum).toContain(
      'https://hookgate.dev/problems/streams-exhausted',
    );
    const async = await documentOf('/api/triggers/default/reports-async/openapi.json');
    const asyncPost = (Object.values(async.body.paths as Json)[0] as Json).post as Json;
    expect(asyncPost.parameters.map((p: Json) => `${p.in}:${p.name}`)).toEqual(
      expect.arrayContaining(['header:X-Callback-URL', 'query:callbackUrl']),
    );
    // An Idempotency-Key retry of an execution discarded since (ADR 0041): the stream's
    // result is gone (410); Async Callback acknowledges it (202).
    const gone = streamPost.responses['410'].content['application/problem+json'].schema;
    expect(gone.allOf[1].properties.type.enum).toEqual([
      'https://hookgate.dev/problems/execution-discarded',
    ]);
    expect(asyncPost.responses['410']).toBeUndefined();
  });
});

describe('the documents match the answers', () => {
  it("reports-async: the callback it sends is the one its document declares, signed with the endpoint's Secret", async () => {
    const { body: doc } = await documentOf('/api/triggers/default/reports-async/openapi.json');
    const [path, item] = Object.entries(doc.paths as Json)[0] as [string, Json];
    const declared = item.post.callbacks.executionResult;
    expect(Object.keys(declared)).toEqual([
      '{$request.header.X-Callback-URL}',
      '{$request.query.callbackUrl}',
    ]);
    const callback = declared['{$request.header.X-Callback-URL}'].post;
    const res = await fetch(`${webhooks}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-callback-url': `http://127.0.0.1:${receiver.port}/reports`,
      },
      body: '{"report":"weekly"}',
    });
    expect(res.status).toBe(202);
    await eventually(() => expect(receiver.received).toHaveLength(1), 10_000);
    const delivery = receiver.received[0] as { headers: Json; body: string };
    const body = JSON.parse(delivery.body) as unknown;
    const validate = schemaValidator(doc, callback.requestBody.content['application/json'].schema);
    expect(validate(body), JSON.stringify(validate.errors)).toBe(true);
    for (const header of callback.parameters as Json[]) {
      expect(header.in).toBe('header');
      expect(delivery.headers[header.name.toLowerCase()], header.name).toEqual(expect.any(String));
    }
    // The example's own Secret (reports-callbacks) signs it.
    const secretDoc = parseAllDocuments(readFileSync(join(EXAMPLES, 'reports-sse.yaml'), 'utf8'))
      .map((d) => d.toJS() as Json)
      .find((d) => d.kind === 'Secret' && d.metadata.name === 'reports-callbacks') as Json;
    const headers = Object.fromEntries(
      Object.entries(delivery.headers).map(([name, value]) => [name, String(value)]),
    );
    expect(
      new Webhook(secretDoc.stringData.demo as string).verify(delivery.body, headers),
    ).toMatchObject({
      type: 'execution.completed',
      triggerKey: 'default/reports-async',
    });
  });

  it('hello: the 202 body matches the Accepted schema', async () => {
    const { body: doc } = await documentOf('/api/triggers/default/hello/openapi.json');
    const [path, item] = Object.entries(doc.paths as Json)[0] as [string, Json];
    const res = await fetch(`${webhooks}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'docs' }),
    });
    expect(String(res.status) in item.post.responses).toBe(true);
    const schema = item.post.responses[String(res.status)].content['application/json'].schema;
    const validate = schemaValidator(doc, schema);
    expect(validate(await res.json()), JSON.stringify(validate.errors)).toBe(true);
  });

  it('hello: a cross-origin request (CORS off) and a reused Idempotency-Key on GET get problems the document describes', async () => {
    const { body: doc } = await documentOf('/api/triggers/default/hello/openapi.json');
    const [path, item] = Object.entries(doc.paths as Json)[0] as [string, Json];
    const crossOrigin = await fetch(`${webhooks}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: 'https://elsewhere.example' },
      body: '{}',
    });
    const first = await fetch(`${webhooks}${path}?n=1`, {
      headers: { 'idempotency-key': 'doc-k' },
    });
    expect(first.status).toBe(202);
    const reused = await fetch(`${webhooks}${path}?n=2`, {
      headers: { 'idempotency-key': 'doc-k' },
    });
    expect(
      (item.get.parameters as { name: string }[]).map((p) => p.name),
      'GET documents the header it honours',
    ).toContain('Idempotency-Key');
    for (const [method, res, status] of [
      ['post', crossOrigin, 403],
      ['get', reused, 422],
    ] as const) {
      expect(res.status).toBe(status);
      const response = item[method].responses[String(status)];
      expect(response, `${method} ${status}`).toBeDefined();
      const validate = schemaValidator(doc, response.content['application/problem+json'].schema);
      expect(validate(await res.json()), JSON.stringify(validate.errors)).toBe(true);
    }
  });

  it('orders-ingest: a request without its key gets a problem the 401 response describes', async () => {
    const { body: doc } = await documentOf('/api/triggers/default/orders-ingest/openapi.json');
    const [path, item] = Object.entries(doc.paths as Json)[0] as [string, Json];
    const res = await fetch(`${webhooks}${path}`, { method: 'POST', body: '{}' });
    expect(res.status).toBe(401);
    const schema = item.post.responses['401'].content['application/problem+json'].schema;
    const validate = schemaValidator(doc, schema);
    expect(validate(await res.json()), JSON.stringify(validate.errors)).toBe(true);
  });
});

describe('the gateway document', () => {
  it('lists every deployed endpoint, with per-trigger component names, and is valid', async () => {
    const { status, body } = await documentOf('/api/openapi.json');
    expect(status).toBe(200);
    await validOpenApi(body);
    expect(Object.keys(body.paths as Json)).toHaveLength(EXAMPLE_TRIGGERS.length);
    expect(Object.keys(body.components.securitySchemes as Json).sort()).toEqual([
      'default.billing-events.signature',
      'default.github-events.signature',
      'default.inventory-sync.oauth2',
      'default.orders-ingest.apiKey',
      'default.payments-notify.bearer',
    ]);
  });

  it('a signed endpoint documents its signature header and the signature problems', async () => {
    const { body } = await documentOf('/api/openapi.json');
    expect(body.components.securitySchemes['default.github-events.signature']).toMatchObject({
      type: 'apiKey',
      in: 'header',
      name: 'X-Hub-Signature-256',
    });
    expect(body.components.securitySchemes['default.billing-events.signature'].name).toBe(
      'webhook-signature',
    );
    const text = JSON.stringify(body);
    expect(text).toContain('https://hookgate.dev/problems/signature-mismatch');
  });

  it('lists 503 execution-result-unavailable on the waiting routes whose deliveries are keyed by their id, only', () => {
    // The implicit key is a delivery's id when it is its replay key (verify.ts
    // replayToken): GitHub, Shopify, Standard Webhooks, generic with an id header and no
    // timestamp or a signed id; never Stripe nor Slack (no id), nor the acknowledging modes.
    const spec = (preset: string, mode: string, generic?: object) =>
      ({
        workflowRef: { name: 'orders' },
        timeout: '30s',
        response: { mode },
        auth: {
          method: 'signature',
          signature: { preset, secretRef: { name: 's' }, ...(generic ? { generic } : {}) },
        },
      }) as unknown as WebhookTriggerSpec;
    const lists = (s: WebhookTriggerSpec) =>
      problemsOf(s, 'POST').includes('HG_ERR_EXECUTION_RESULT_UNAVAILABLE');
    for (const preset of ['github', 'shopify', 'standardWebhooks'])
      for (const mode of ['waitForCompletion', 'waitForResponseNode'])
        expect(lists(spec(preset, mode)), `${preset} ${mode}`).toBe(true);
    for (const preset of ['stripe', 'slack'])
      for (const mode of ['waitForCompletion', 'waitForResponseNode'])
        expect(lists(spec(preset, mode)), `${preset} ${mode}`).toBe(false);
    expect(lists(spec('github', 'immediateAck'))).toBe(false);
    expect(lists(spec('github', 'ackSubscribe'))).toBe(false);
  });

  it('410 execution-discarded: listed where an Idempotency-Key request can get it, and said to need one; a delivery keyed by its id gets the 202 listed instead', async () => {
    // A discarded success (ADR 0041) leaves a tombstone only for a request with a key: an
    // explicit Idempotency-Key gets 410 execution-discarded in the modes that wait for a
    // result or events; a signed delivery keyed by its id (its implicit key, claims.ts)
    // gets 202 {executionId, status: succeeded, links} (response-modes.ts
    // acknowledgeDelivered), never 410.
    const github = rt.table.match('/webhook/default_production_github-events/github')?.route;
    expect(github).toBeDefined();
    if (github === undefined) return;
    const documentFor = (
      mode: string,
      change: (spec: Json) => void = () => {},
      methods = ['POST'],
    ) => {
      const spec = structuredClone(github.spec) as unknown as Json;
      spec.response = { ...spec.response, mode, contentType: 'application/json' };
      spec.methods = methods;
      change(spec);
      return triggerDocument(
        { ...github, spec: spec as unknown as WebhookTriggerSpec },
        'https://hooks.example.com',
      ) as Json;
    };
    const operation = (doc: Json, method = 'post') =>
      Object.values(doc.paths as Json)[0][method] as Json;
    const discarded = 'https://hookgate.dev/problems/execution-discarded';
    const delivered = {
      executionId: 'e-1',
      status: 'succeeded',
      links: {
        self: '/webhook-executions/e-1?token=t',
        events: '/webhook-executions/e-1/events?token=t',
      },
    };
    const deliveredNote =
      'a signed delivery sent without one is answered 202 with status succeeded';

    for (const mode of ['waitForCompletion', 'waitForResponseNode', 'sseStream', 'ackSubscribe']) {
      const doc = documentFor(mode);
      await validOpenApi(doc);
      const { responses, parameters } = operation(doc);
      // Listed: a caller may send an Idempotency-Key (it wins over the delivery id).
      expect(
        responses['410'].content['application/problem+json'].schema.allOf[1].properties.type.enum,
        mode,
      ).toContain(discarded);
      expect(responses['410'].description, mode).toContain(
        '`execution-discarded` answers only a request sent with an Idempotency-Key',
      );
      expect(responses['410'].description, mode).toContain(deliveredNote);
      // The delivery's own answer: 202 succeeded, a body that matches the schema.
      const schema = responses['202'].content['application/json'].schema;
      expect(schemaValidator(doc, schema)(delivered), mode).toBe(true);
      // Only succeeded, where the 202 is the delivery's alone (Ack + Subscribe's own 202
      // and a respond node's body allow others).
      expect(schemaValidator(doc, schema)({ ...delivered, status: 'queued' }), mode).toBe(
        mode === 'ackSubscribe' || mode === 'waitForResponseNode',
      );
      expect(responses['202'].description, mode).toContain('sent without an Idempotency-Key');
      expect(parameters[0].description, mode).toContain(
        "a signed delivery's id (X-GitHub-Delivery) is its key",
      );
    }
    // Wait for Response Node: a respond node may answer 202 too, so its body stays allowed.
    const respond = operation(documentFor('waitForResponseNode')).responses['202'];
    expect(respond.content['application/json'].schema.anyOf).toHaveLength(2);
    // HEAD: no body.
    const head = operation(
      documentFor('waitForCompletion', () => {}, ['HEAD']),
      'head',
    );
    expect(head.responses['202'].content).toBeUndefined();

    // No implicit key: Stripe (its replay key is the signed bytes), or replays not
    // remembered. 410 needs an explicit key there, and no 202 is answered.
    const stripe = (spec: Json) => {
      spec.auth = {
        method: 'signature',
        signature: {
          preset: 'stripe',
          secretRef: { name: 's' },
          toleranceSeconds: 300,
          rejectReplays: true,
        },
      };
    };
    const unremembered = (spec: Json) => {
      spec.auth.signature.rejectReplays = false;
    };
    for (const change of [stripe, unremembered]) {
      const doc = documentFor('waitForCompletion', change);
      await validOpenApi(doc);
      const { responses, parameters } = operation(doc);
      expect(responses['410'].description).toContain(
        '`execution-discarded` answers only a request sent with an Idempotency-Key',
      );
      expect(responses['410'].description).not.toContain(deliveredNote);
      expect(responses['202']).toBeUndefined();
      expect(responses['503'].description).not.toContain('execution-result-unavailable');
      expect(parameters[0].description).not.toContain('is its key');
    }
    // The acknowledging modes answer 202 with the configured status in every case: no 410.
    for (const mode of ['immediateAck', 'asyncCallback']) {
      const { responses } = operation(documentFor(mode));
      expect(JSON.stringify(responses), mode).not.toContain(discarded);
    }
  });

  it('a trigger that is not deployed: 404 route-not-found', async () => {
    const { status, body } = await documentOf('/api/triggers/default/nope/openapi.json');
    expect(status).toBe(404);
    expect(body.type).toBe('https://hookgate.dev/problems/route-not-found');
  });
});

describe('access: as reading the trigger', () => {
  /** Two users: `all-of-it` may read everything, `team-a-only` namespace team-a only. */
  const authenticator: AdminAuthenticator = {
    authenticate: (token) =>
      Promise.resolve(
        ['all-of-it', 'team-a-only'].includes(token) ? { username: token, groups: [] } : undefined,
      ),
    authorize: (user, attributes) =>
      Promise.resolve(user.username === 'all-of-it' || attributes.namespace === 'team-a'),
  };
  let guarded: TestRuntime;
  let base: string;
  const as = (token: string) => ({ authorization: `Bearer ${token}` });
  const get = async (path: string, headers: Record<string, string> = {}) => {
    const res = await fetch(`${base}${path}`, { headers });
    return { status: res.status, body: (await res.json()) as Json };
  };

  beforeAll(async () => {
    guarded = await startRuntime({ adminAccess: new AdminAccess(authenticator) });
    const docs = ['team-a', 'team-b'].flatMap((namespace) => [
      workflow('orders', {}, { namespace }),
      trigger('ingest', { pathSegment: 'ingest' }, { namespace }),
    ]);
    await guarded.apply('teams.yaml', docs);
    await eventually(() => expect(guarded.table.size).toBe(2));
    base = await guarded.admin.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    await guarded?.stop();
  });

  it('no token: 401; a trigger of another namespace: 403; its own: 200', async () => {
    expect((await get('/api/triggers/team-a/ingest/openapi.json')).status).toBe(401);
    expect((await get('/api/openapi.json')).status).toBe(401);
    const other = await get('/api/triggers/team-b/ingest/openapi.json', as('team-a-only'));
    expect(other.status).toBe(403);
    expect(other.body.type).toBe('https://hookgate.dev/problems/admin-forbidden');
    expect((await get('/api/triggers/team-a/ingest/openapi.json', as('team-a-only'))).status).toBe(
      200,
    );
  });

  it('the gateway document holds only the namespaces the reader may see', async () => {
    const mine = await get('/api/openapi.json', as('team-a-only'));
    expect(Object.keys(mine.body.paths as Json)).toEqual([
      '/webhook/team-a_production_orders/ingest',
    ]);
    const all = await get('/api/openapi.json', as('all-of-it'));
    expect(Object.keys(all.body.paths as Json)).toHaveLength(2);
  });
});
