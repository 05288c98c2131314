// Every field of the spec's configuration tables: a good value is admitted (with
// defaults filled in) and bad values are rejected with the field path.
import { describe, expect, it } from 'vitest';
import { admitResource } from '../../../api/validate.ts';
import { trigger, workflow } from '../../support/manifests.ts';

type Spec = Record<string, unknown>;
const admitTrigger = (spec: Spec) => admitResource(trigger('t', spec));
const admitWorkflow = (spec: Spec) => admitResource(workflow('w', spec));
const fields = (r: ReturnType<typeof admitResource>) => (r.ok ? [] : r.errors.map((e) => e.field));
const messages = (r: ReturnType<typeof admitResource>) =>
  r.ok ? [] : r.errors.map((e) => e.message);

const apiKey = { method: 'apiKey', apiKey: { secretRef: { name: 'keys' } } };
const bearer = {
  method: 'bearer',
  bearer: { issuer: 'https://issuer', audiences: ['api'], jwksUrl: 'https://issuer/jwks' },
};
const oauth2 = {
  method: 'oauth2',
  oauth2: {
    issuer: 'https://issuer',
    audiences: ['api'],
    jwksUrl: 'https://issuer/jwks',
    requiredScopes: ['orders:write'],
  },
};

describe('WebhookTrigger: accepted values and defaults', () => {
  it('fills every default of the spec', () => {
    const r = admitTrigger({});
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.object.spec).toMatchObject({
      pathSegment: 'default',
      methods: ['POST'],
      timeout: '30s',
      requireHttps: false,
      deploy: true,
      maxBodyBytes: 1048576,
      response: {
        mode: 'immediateAck',
        contentType: 'application/json',
        headers: { correlationId: true, requestId: true, timestamp: false, custom: [] },
      },
    });
  });

  it.each([
    ['preset path segment', { pathSegment: 'ingest' }],
    ['each preset', { pathSegment: 'notify' }],
    ['custom segment with params', { pathSegment: 'orders/:orderId/items/:item' }],
    [
      'all seven methods',
      { methods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'] },
    ],
    ['timeout in seconds', { timeout: '45s' }],
    ['timeout in minutes', { timeout: '5m' }],
    ['timeout of 1h', { timeout: '1h' }],
    ['requireHttps', { requireHttps: true }],
    ['API key auth', { auth: apiKey }],
    [
      'API key auth, custom header',
      { auth: { ...apiKey, apiKey: { header: 'X-Partner-Key', secretRef: { name: 'k' } } } },
    ],
    ['Bearer JWT with JWKS', { auth: bearer }],
    [
      'Bearer JWT with a static key',
      {
        auth: {
          method: 'bearer',
          bearer: {
            issuer: 'i',
            audiences: ['a'],
            algorithms: ['HS256'],
            keySecretRef: { name: 's', key: 'k' },
          },
        },
      },
    ],
    ['OAuth 2.0 with JWT access tokens', { auth: oauth2 }],
    [
      'OAuth 2.0 with JWT access tokens of a required type',
      { auth: { ...oauth2, oauth2: { ...oauth2.oauth2, requiredType: 'at+jwt' } } },
    ],
    [
      'OAuth 2.0 with introspection',
      {
        auth: {
          method: 'oauth2',
          oauth2: {
            issuer: 'https://issuer',
            audiences: ['api'],
            introspection: {
              url: 'https://issuer/introspect',
              clientId: 'c',
              clientSecretRef: { name: 's', key: 'k' },
            },
          },
        },
      },
    ],
    ['rate limit', { rateLimit: { requestsPerMinute: 120 } }],
    [
      'CORS',
      {
        cors: {
          enabled: true,
          allowedOrigins: ['https://app.example.com'],
          allowCredentials: true,
        },
      },
    ],
    [
      'manual schema with every field column',
      {
        schema: {
          mode: 'manual',
          input: {
            source: 'orders-api',
            fields: [
              { name: 'orderId', description: 'id', type: 'string', value: 'A-1', required: true },
            ],
          },
          output: { asset: 'json', fields: [{ name: 'ok', type: 'boolean' }] },
        },
      },
    ],
    [
      'automatic schema',
      {
        schema: {
          mode: 'automatic',
          input: { example: '{"a":1}' },
          output: { jsonSchema: '{"type":"object"}' },
        },
      },
    ],
    [
      'automatic schema learning with empty sides',
      {
        schema: {
          mode: 'automatic',
          input: {},
          output: {},
          learning: { enabled: true, maxSamples: 20 },
        },
      },
    ],
    ...(
      [
        'immediateAck',
        'asyncCallback',
        'ackSubscribe',
        'waitForCompletion',
        'sseStream',
        'waitForResponseNode',
      ] as const
    ).map((mode) => [`response mode ${mode}`, { response: { mode } }] as [string, Spec]),
    ['status code 204', { response: { mode: 'immediateAck', statusCode: 204 } }],
    ['custom status code', { response: { mode: 'waitForCompletion', statusCode: 201 } }],
    ['content types', { response: { mode: 'waitForCompletion', contentType: 'application/xml' } }],
    [
      'content type with charset',
      { response: { mode: 'waitForCompletion', contentType: 'text/plain; charset=utf-8' } },
    ],
    [
      'header toggles and custom headers',
      {
        response: {
          mode: 'immediateAck',
          headers: {
            correlationId: false,
            requestId: true,
            timestamp: true,
            custom: [
              { name: 'X-Version', value: 'v2' },
              { name: 'X-Note', value: 'caf\u00e9\t"quoted"; a=1' },
            ],
          },
        },
      },
    ],
    ['deploy off', { deploy: false }],
    [
      'test credentials',
      {
        auth: apiKey,
        testCredentials: { type: 'apiKey', secretRef: { name: 'keys', key: 'acme' } },
      },
    ],
    ['body limit', { maxBodyBytes: 2048 }],
    ['input limits', { inputLimits: { maxDepth: 16, maxKeys: 500, maxStringBytes: 4096 } }],
  ] as [string, Spec][])('accepts %s', (_name, spec) => {
    const r = admitTrigger(spec);
    expect(r.ok ? [] : r.errors).toEqual([]);
  });
});

describe('WebhookTrigger: bad values are rejected with a field path', () => {
  it.each([
    ['unknown field', { pathSegmnt: 'x' }, 'spec.pathSegmnt', 'unknown field'],
    ['missing workflowRef', { workflowRef: undefined }, 'spec.workflowRef', 'Required'],
    ['missing response mode', { response: {} }, 'spec.response.mode', 'Required'],
    [
      'unknown response mode',
      { response: { mode: 'later' } },
      'spec.response.mode',
      'supported values',
    ],
    ['path segment with a space', { pathSegment: 'in gest' }, 'spec.pathSegment', 'should match'],
    ['path segment with ..', { pathSegment: '../admin' }, 'spec.pathSegment', 'should match'],
    ['empty path segment', { pathSegment: '' }, 'spec.pathSegment', 'should match'],
    ['unknown method', { methods: ['FETCH'] }, 'spec.methods[0]', 'supported values'],
    ['no method', { methods: [] }, 'spec.methods', ''],
    ['duplicate method', { methods: ['GET', 'GET'] }, 'spec.methods[1]', 'Duplicate'],
    ['timeout without unit', { timeout: '30' }, 'spec.timeout', 'should match'],
    ['timeout in days', { timeout: '1d' }, 'spec.timeout', 'should match'],
    ['timeout over 1h', { timeout: '61m' }, 'spec.timeout', 'at most 1h'],
    ['zero timeout', { timeout: '0s' }, 'spec.timeout', 'should match'],
    ['requireHttps not boolean', { requireHttps: 'yes' }, 'spec.requireHttps', 'boolean'],
    ['auth method unknown', { auth: { method: 'basic' } }, 'spec.auth.method', 'supported values'],
    [
      'apiKey method without apiKey',
      { auth: { method: 'apiKey' } },
      'spec.auth.apiKey',
      'required when auth.method is apiKey',
    ],
    [
      'bearer method without bearer',
      { auth: { method: 'bearer' } },
      'spec.auth.bearer',
      'required',
    ],
    [
      'oauth2 method without oauth2',
      { auth: { method: 'oauth2' } },
      'spec.auth.oauth2',
      'required',
    ],
    [
      'bearer with both key sources',
      {
        auth: {
          method: 'bearer',
          bearer: { ...bearer.bearer, keySecretRef: { name: 's', key: 'k' } },
        },
      },
      'spec.auth.bearer',
      'exactly one of jwksUrl and keySecretRef',
    ],
    [
      'static key with two algorithms',
      {
        auth: {
          method: 'bearer',
          bearer: {
            issuer: 'i',
            audiences: ['a'],
            algorithms: ['HS256', 'RS256'],
            keySecretRef: { name: 's', key: 'k' },
          },
        },
      },
      'spec.auth.bearer.algorithms',
      'exactly one algorithm',
    ],
    [
      'bearer HS* with a JWKS (a JWKS holds public keys, not a shared secret)',
      {
        auth: { method: 'bearer', bearer: { ...bearer.bearer, algorithms: ['RS256', 'HS256'] } },
      },
      'spec.auth.bearer.algorithms',
      'HS256, HS384 and HS512 are not verified with a JWKS',
    ],
    [
      'oauth2 HS* with a JWKS',
      { auth: { ...oauth2, oauth2: { ...oauth2.oauth2, algorithms: ['HS512'] } } },
      'spec.auth.oauth2.algorithms',
      'HS256, HS384 and HS512 are not verified with a JWKS',
    ],
    [
      'algorithm none',
      { auth: { method: 'bearer', bearer: { ...bearer.bearer, algorithms: ['none'] } } },
      'spec.auth.bearer.algorithms[0]',
      'supported values',
    ],
    [
      'bearer without audience',
      { auth: { method: 'bearer', bearer: { issuer: 'i', audiences: [], jwksUrl: 'https://x' } } },
      'spec.auth.bearer.audiences',
      '',
    ],
    [
      'oauth2 requiredType over 64 characters',
      { auth: { ...oauth2, oauth2: { ...oauth2.oauth2, requiredType: 'x'.repeat(65) } } },
      'spec.auth.oauth2.requiredType',
      '',
    ],
    [
      'oauth2 requiredType with introspection',
      {
        auth: {
          method: 'oauth2',
          oauth2: {
            issuer: 'https://issuer',
            audiences: ['api'],
            requiredType: 'at+jwt',
            introspection: {
              url: 'https://issuer/introspect',
              clientId: 'c',
              clientSecretRef: { name: 's', key: 'k' },
            },
          },
        },
      },
      'spec.auth.oauth2.requiredType',
      'requiredType applies to JWT access tokens (jwksUrl), not to introspection',
    ],
    [
      'oauth2 with neither jwks nor introspection',
      { auth: { method: 'oauth2', oauth2: { issuer: 'i', audiences: ['a'] } } },
      'spec.auth.oauth2',
      'exactly one of jwksUrl and introspection',
    ],
    [
      'rate limit zero',
      { rateLimit: { requestsPerMinute: 0 } },
      'spec.rateLimit.requestsPerMinute',
      '',
    ],
    [
      'rate limit fractional',
      { rateLimit: { requestsPerMinute: 1.5 } },
      'spec.rateLimit.requestsPerMinute',
      'integer',
    ],
    [
      'rate limit as text',
      { rateLimit: { requestsPerMinute: '100' } },
      'spec.rateLimit.requestsPerMinute',
      'integer',
    ],
    [
      'CORS on without origins',
      { cors: { enabled: true } },
      'spec.cors.allowedOrigins',
      'at least one origin',
    ],
    [
      'CORS * with credentials',
      { cors: { enabled: true, allowedOrigins: ['*'], allowCredentials: true } },
      'spec.cors.allowedOrigins',
      'cannot be combined',
    ],
    [
      'CORS origin with a path',
      { cors: { enabled: true, allowedOrigins: ['https://a.com/x'] } },
      'spec.cors.allowedOrigins[0]',
      'should match',
    ],
    [
      'CORS null origin',
      { cors: { enabled: true, allowedOrigins: ['null'] } },
      'spec.cors.allowedOrigins[0]',
      'should match',
    ],
    ['schema mode unknown', { schema: { mode: 'magic' } }, 'spec.schema.mode', 'supported values'],
    [
      'automatic IO without output',
      { schema: { mode: 'automatic', input: { example: '{}' } } },
      'spec.schema',
      'Please provide both input and output schemas for automatic IO mode.',
    ],
    [
      'learning in manual mode',
      { schema: { mode: 'manual', learning: { enabled: true } } },
      'spec.schema',
      'Schema learning needs automatic IO mode.',
    ],
    [
      'learning without bound',
      {
        schema: {
          mode: 'automatic',
          input: {},
          output: {},
          learning: { enabled: true, maxSamples: 100000 },
        },
      },
      'spec.schema.learning.maxSamples',
      'less than or equal to 200',
    ],
    [
      'field type unknown',
      { schema: { input: { fields: [{ name: 'a', type: 'date' }] } } },
      'spec.schema.input.fields[0].type',
      'supported values',
    ],
    [
      'field without name',
      { schema: { input: { fields: [{ type: 'string' }] } } },
      'spec.schema.input.fields[0].name',
      'Required',
    ],
    [
      'duplicate field name',
      {
        schema: {
          input: {
            fields: [
              { name: 'a', type: 'string' },
              { name: 'a', type: 'number' },
            ],
          },
        },
      },
      'spec.schema.input.fields[1]',
      'Duplicate',
    ],
    [
      'status code 99',
      { response: { mode: 'immediateAck', statusCode: 99 } },
      'spec.response.statusCode',
      '',
    ],
    [
      'status code 600',
      { response: { mode: 'immediateAck', statusCode: 600 } },
      'spec.response.statusCode',
      '',
    ],
    [
      'SSE with status 202',
      { response: { mode: 'sseStream', statusCode: 202 } },
      'spec.response.statusCode',
      'always answered with 200',
    ],
    [
      'callbackSecretRef outside asyncCallback',
      { response: { mode: 'waitForCompletion', callbackSecretRef: { name: 'cb' } } },
      'spec.response.callbackSecretRef',
      'needs mode asyncCallback',
    ],
    [
      'callbackSecretRef with an empty key list',
      { response: { mode: 'asyncCallback', callbackSecretRef: { name: 'cb', keys: [] } } },
      'spec.response.callbackSecretRef.keys',
      '',
    ],
    [
      'content type not a MIME type',
      { response: { mode: 'immediateAck', contentType: 'json' } },
      'spec.response.contentType',
      'should match',
    ],
    [
      'header value with CR/LF',
      {
        response: {
          mode: 'immediateAck',
          headers: { custom: [{ name: 'X-A', value: 'a\r\nSet-Cookie: x=1' }] },
        },
      },
      'spec.response.headers.custom[0].value',
      'should match',
    ],
    [
      'header value Node cannot send (a character past U+00FF)',
      { response: { mode: 'immediateAck', headers: { custom: [{ name: 'X-A', value: '5 €' }] } } },
      'spec.response.headers.custom[0].value',
      'should match',
    ],
    [
      'header value with a control character',
      {
        response: {
          mode: 'immediateAck',
          headers: { custom: [{ name: 'X-A', value: 'a\u0007' }] },
        },
      },
      'spec.response.headers.custom[0].value',
      'should match',
    ],
    [
      'header name with a space',
      { response: { mode: 'immediateAck', headers: { custom: [{ name: 'X A', value: 'a' }] } } },
      'spec.response.headers.custom[0].name',
      'should match',
    ],
    ...[
      'Content-Length',
      'Transfer-Encoding',
      'Connection',
      'Set-Cookie',
      'Access-Control-Allow-Origin',
      'content-type',
      'NEL',
      'Report-To',
      'Reporting-Endpoints',
      'Service-Worker-Allowed',
      'Clear-Site-Data',
      'Alt-Svc',
    ].map(
      (name) =>
        [
          `forbidden header ${name}`,
          { response: { mode: 'immediateAck', headers: { custom: [{ name, value: 'x' }] } } },
          'spec.response.headers.custom[0].name',
          'cannot be set here',
        ] as [string, Spec, string, string],
    ),
    ['deploy not boolean', { deploy: 'true' }, 'spec.deploy', 'boolean'],
    [
      'test credentials type mismatch',
      { auth: apiKey, testCredentials: { type: 'oauth2', secretRef: { name: 's', key: 'k' } } },
      'spec.testCredentials.type',
      'must match auth.method',
    ],
    [
      'test credentials without auth',
      { testCredentials: { type: 'apiKey', secretRef: { name: 's', key: 'k' } } },
      'spec.testCredentials.type',
      'must match auth.method',
    ],
    ['body limit over 16 MiB', { maxBodyBytes: 17 * 1024 * 1024 }, 'spec.maxBodyBytes', ''],
    ['nesting limit over 256', { inputLimits: { maxDepth: 257 } }, 'spec.inputLimits.maxDepth', ''],
    ['key limit of 0', { inputLimits: { maxKeys: 0 } }, 'spec.inputLimits.maxKeys', ''],
  ] as [string, Spec, string, string][])('rejects %s', (_name, spec, field, message) => {
    const r = admitTrigger(spec);
    expect(r.ok).toBe(false);
    expect(fields(r)).toContain(field);
    if (message) expect(messages(r).join(' | ')).toContain(message);
  });
});

describe('Workflow', () => {
  it('fills defaults', () => {
    const r = admitWorkflow({ environment: undefined, publish: undefined });
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.object.spec).toMatchObject({ publish: true, environment: 'development' });
  });

  it.each([
    ['unknown environment', { environment: 'qa' }, 'spec.environment'],
    ['application with upper case', { application: 'Shop' }, 'spec.application'],
    ['no nodes', { nodes: [] }, 'spec.nodes'],
    [
      'duplicate node ids',
      {
        nodes: [
          { id: 'a', type: 'transform', expression: '$' },
          { id: 'a', type: 'fail' },
        ],
      },
      'spec.nodes[1]',
    ],
    ['unknown node type', { nodes: [{ id: 'a', type: 'loop' }] }, 'spec.nodes[0].type'],
    [
      'transform without expression',
      { nodes: [{ id: 'a', type: 'transform' }] },
      'spec.nodes[0].expression',
    ],
    ['http without request', { nodes: [{ id: 'a', type: 'http' }] }, 'spec.nodes[0].request'],
    [
      'http to a non-http URL',
      { nodes: [{ id: 'a', type: 'http', request: { url: 'file:///etc/passwd' } }] },
      'spec.nodes[0].request.url',
    ],
    ['delay without duration', { nodes: [{ id: 'a', type: 'delay' }] }, 'spec.nodes[0].duration'],
    ['if without condition', { nodes: [{ id: 'a', type: 'if' }] }, 'spec.nodes[0].condition'],
    ['switch without cases', { nodes: [{ id: 'a', type: 'switch' }] }, 'spec.nodes[0].cases'],
    [
      'respond with an interim (1xx) status',
      { nodes: [{ id: 'a', type: 'respond', statusCode: 101 }] },
      'spec.nodes[0].statusCode',
    ],
    ['publish not boolean', { publish: 'no' }, 'spec.publish'],
    [
      'executionRecords.succeeded not Keep or Discard',
      { executionRecords: { succeeded: 'None' } },
      'spec.executionRecords.succeeded',
    ],
    [
      'executionRecords.succeeded as a boolean',
      { executionRecords: { succeeded: false } },
      'spec.executionRecords.succeeded',
    ],
    [
      'executionRecords with an unknown field',
      { executionRecords: { failed: 'Discard' } },
      'spec.executionRecords.failed',
    ],
  ] as [string, Spec, string][])('rejects %s', (_name, spec, field) => {
    expect(fields(admitWorkflow(spec))).toContain(field);
  });

  it('executionRecords: succeeded defaults to Keep; Discard is taken as written', () => {
    const records = (spec: Spec) => {
      const r = admitWorkflow(spec);
      return r.ok ? (r.object.spec as { executionRecords?: unknown }).executionRecords : 'refused';
    };
    expect(records({})).toBeUndefined();
    expect(records({ executionRecords: {} })).toEqual({ succeeded: 'Keep' });
    expect(records({ executionRecords: { succeeded: 'Discard' } })).toEqual({
      succeeded: 'Discard',
    });
  });

  it('rejects a wrong apiVersion and kind', () => {
    expect(fields(admitResource({ ...workflow('w'), apiVersion: 'hookgate.dev/v1' }))).toEqual([
      'apiVersion',
    ]);
    expect(fields(admitResource({ ...workflow('w'), kind: 'Pipeline' }))).toEqual(['kind']);
  });
});

describe('metadata', () => {
  it('a field ObjectMeta does not have is an unknown field, as strict decoding says', () => {
    const r = admitResource({ ...workflow('w'), metadata: { name: 'w', $ref: 'x', Spec: {} } });
    expect(fields(r)).toEqual(['metadata.$ref', 'metadata.Spec']);
    expect(messages(r)).toEqual(['unknown field', 'unknown field']);
  });
  it('a metadata that is not an object is refused', () => {
    expect(fields(admitResource({ ...workflow('w'), metadata: [] }))).toContain('metadata');
  });
  it('the fields ObjectMeta has are accepted', () => {
    const r = admitResource({
      ...workflow('w'),
      metadata: { name: 'w', namespace: 'ns', labels: { a: 'b' }, annotations: {}, finalizers: [] },
    });
    expect(r.ok).toBe(true);
  });
});

describe('metadata: labels and annotations as an API server checks them', () => {
  const withMeta = (metadata: Record<string, unknown>) => {
    const t = trigger('t', { workflowRef: { name: 'w' } }) as { metadata: Record<string, unknown> };
    return admitResource({ ...t, metadata: { ...t.metadata, ...metadata } });
  };

  it('admits qualified keys, empty and 63-character values, any case in annotation prefixes', () => {
    const r = withMeta({
      labels: {
        'app.kubernetes.io/name': 'orders',
        tier: '',
        v: 'a'.repeat(63),
        'A_b.C-1': 'X_y.z-9',
      },
      annotations: { 'Example.COM/owner': 'team', note: 'x'.repeat(200 * 1024) },
    });
    expect(messages(r)).toEqual([]);
  });

  it.each([
    [{ labels: { 'bad key': 'v' } }, 'metadata.labels', '"bad key" is not a label key'],
    [
      { labels: { 'Example.com/app': 'v' } },
      'metadata.labels',
      '"Example.com/app" is not a label key',
    ],
    [{ labels: { 'example.com/': 'v' } }, 'metadata.labels', '"example.com/" is not a label key'],
    [{ labels: { ['k'.repeat(64)]: 'v' } }, 'metadata.labels', 'is not a label key'],
    [{ labels: { app: '-x' } }, 'metadata.labels', 'the value of "app" is not a label value'],
    [
      { labels: { app: 'v'.repeat(64) } },
      'metadata.labels',
      'the value of "app" is not a label value',
    ],
    [{ annotations: { 'a/b/c': 'x' } }, 'metadata.annotations', '"a/b/c" is not an annotation key'],
    [
      { annotations: { big: 'x'.repeat(256 * 1024) } },
      'metadata.annotations',
      'the annotations take 262147 bytes; at most 262144 (256 KiB) in all',
    ],
  ])('refuses %j', (metadata, field, message) => {
    const r = withMeta(metadata);
    expect(fields(r)).toEqual([field]);
    expect(messages(r)[0]).toContain(message);
  });
});
