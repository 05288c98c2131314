// Structural-schema semantics of the in-memory API server (testing/kube-apiserver/
// schema/): pruning, defaulting, OpenAPI validation, list types and CEL rules, checked
// over HTTP with the causes a real API server (1.35) sends. Several cases are the
// ones a naive implementation gets wrong: a null on a non-nullable field with a
// default, defaults inside pruned objects, unknown fields below
// preserve-unknown-fields, duplicate list-map keys, transition rules on create.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../../testing/kube-apiserver/index.ts';
import { goFloat } from '../../testing/kube-apiserver/schema/errors.ts';
import { validateSchema } from '../../testing/kube-apiserver/schema/validate.ts';
import { client, readWatch, type Reply } from './support.ts';

const GROUP = 'schema.hookgate.dev';
const CRDS = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';
const MERGE = { 'Content-Type': 'application/merge-patch+json' };

type Schema = Record<string, unknown>;
interface Cause {
  field?: string;
  message: string;
  reason: string;
}
interface Status {
  message: string;
  reason: string;
  details?: { causes?: Cause[] };
}
type Spec = Record<string, unknown> & { [key: string]: unknown };
interface Obj {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; resourceVersion?: string; generation?: number };
  spec?: Spec;
}

let server: KubeApiServer;
let call: ReturnType<typeof client>;
let kinds = 0;

beforeAll(async () => {
  server = await startKubeApiServer();
  call = client(server);
});

afterAll(async () => {
  await server.close();
});

function crdFor(kind: string, spec: Schema, root: Schema = {}): Record<string, unknown> {
  const plural = `${kind.toLowerCase()}s`;
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${GROUP}` },
    spec: {
      group: GROUP,
      scope: 'Namespaced',
      names: { kind, plural, singular: kind.toLowerCase(), listKind: `${kind}List` },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: 'object', properties: { spec }, ...root } },
        },
      ],
    },
  };
}

/** Create a CRD whose `spec` has this schema; return a client for its objects. */
async function kind(spec: Schema, root: Schema = {}) {
  const name = `Kind${++kinds}`;
  const created = await call('POST', CRDS, crdFor(name, spec, root));
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const path = `/apis/${GROUP}/v1/namespaces/default/${name.toLowerCase()}s`;
  const body = (n: string, s: unknown): Obj => ({
    apiVersion: `${GROUP}/v1`,
    kind: name,
    metadata: { name: n },
    spec: s as Spec,
  });
  return {
    plural: `${name.toLowerCase()}s`,
    create: (n: string, s: unknown, query = '') =>
      call<Obj & Status>('POST', `${path}${query}`, body(n, s)),
    patch: (n: string, s: unknown) =>
      call<Obj & Status>('PATCH', `${path}/${n}`, { spec: s }, MERGE),
    put: (obj: Obj) => call<Obj & Status>('PUT', `${path}/${obj.metadata.name}`, obj),
    /** Replace the CRD's spec schema (tightening a rule, as an upgrade would). */
    reschema: async (next: Schema) => {
      const cur = await call<{ metadata: { resourceVersion: string } }>(
        'GET',
        `${CRDS}/${name.toLowerCase()}s.${GROUP}`,
      );
      const crd = crdFor(name, next, root) as { metadata: Record<string, unknown> };
      crd.metadata.resourceVersion = cur.body.metadata.resourceVersion;
      const res = await call('PUT', `${CRDS}/${name.toLowerCase()}s.${GROUP}`, crd);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    },
  };
}

function ok(res: Reply<Obj & Status>, status = 201): Obj {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  return res.body;
}

/** The causes of a 422 as `field: message` lines (how kubectl prints them). */
function causes(res: Reply<Obj & Status>): string[] {
  expect(res.status, JSON.stringify(res.body)).toBe(422);
  expect(res.body.reason).toBe('Invalid');
  return (res.body.details?.causes ?? []).map((c) => `${c.field ?? ''}: ${c.message}`);
}

describe('pruning', () => {
  it('keeps unknown fields below preserve-unknown-fields, but still prunes the fields it specifies', async () => {
    const k = await kind({
      type: 'object',
      properties: {
        extra: {
          type: 'object',
          'x-kubernetes-preserve-unknown-fields': true,
          properties: { known: { type: 'object', properties: { a: { type: 'string' } } } },
        },
        list: {
          type: 'array',
          'x-kubernetes-preserve-unknown-fields': true,
          items: { type: 'object', properties: { a: { type: 'string' } } },
        },
      },
    });
    const spec = {
      extra: { anything: { goes: [1] }, known: { a: 'x', b: 'pruned' } },
      list: [{ a: 'x', kept: true }],
      bogus: 1,
    };
    const strict = await k.create('p1', spec, '?fieldValidation=Strict');
    expect(strict.status).toBe(400);
    // Sorted, as the API server sorts them; nothing below preserve-unknown-fields.
    expect(strict.body.message).toBe(
      'strict decoding error: unknown field "spec.bogus", unknown field "spec.extra.known.b"',
    );
    const warn = await k.create('p1', spec);
    expect(ok(warn).spec).toEqual({
      extra: { anything: { goes: [1] }, known: { a: 'x' } },
      list: [{ a: 'x', kept: true }],
    });
    expect(warn.headers.get('warning')).toContain('unknown field \\"spec.extra.known.b\\"');
  });

  it('treats apiVersion, kind and metadata as implicit at the root (Strict accepts a schema that omits them)', async () => {
    const k = await kind({ type: 'object', properties: { a: { type: 'string' } } });
    const res = await k.create('p2', { a: 'x' }, '?fieldValidation=Strict');
    expect(ok(res)).toMatchObject({ apiVersion: `${GROUP}/v1`, spec: { a: 'x' } });
  });

  it('keeps apiVersion, kind and metadata of an embedded resource, drops unknown metadata fields, requires kind', async () => {
    const k = await kind({
      type: 'object',
      properties: {
        template: {
          type: 'object',
          'x-kubernetes-embedded-resource': true,
          properties: { spec: { type: 'object', properties: { image: { type: 'string' } } } },
        },
      },
    });
    const template = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'p', labels: { a: 'b' }, bogus: 1 },
      spec: { image: 'x', other: 1 },
    };
    const res = await k.create('p3', { template });
    expect(ok(res).spec?.template).toEqual({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'p', labels: { a: 'b' } },
      spec: { image: 'x' },
    });
    expect(res.headers.get('warning')).toContain('spec.template.metadata.bogus');
    expect(causes(await k.create('p3b', { template: { apiVersion: 'v1' } }))).toEqual([
      'spec.template.kind: Required value',
    ]);
  });
});

describe('defaulting', () => {
  const schema = {
    type: 'object',
    properties: {
      mode: { type: 'string', default: 'fast' },
      color: { type: 'string' },
      note: { type: 'string', nullable: true, default: 'n' },
      labels: { type: 'object', additionalProperties: { type: 'string' } },
      limits: {
        type: 'object',
        default: {},
        properties: { cpu: { type: 'string', default: '1' } },
      },
      items: {
        type: 'array',
        items: { type: 'object', properties: { weight: { type: 'integer', default: 5 } } },
      },
    },
  };

  it('a null on a non-nullable field is defaulted when there is a default and dropped when not; a nullable null stays', async () => {
    const k = await kind(schema);
    const res = await k.create('d1', { mode: null, color: null, note: null, labels: { a: null } });
    expect(ok(res).spec).toEqual({ mode: 'fast', note: null, labels: {}, limits: { cpu: '1' } });
  });

  it('defaults inside a defaulted object and list items, never inside a pruned object', async () => {
    const k = await kind(schema);
    const res = await k.create('d2', {
      items: [{}, { weight: 1 }],
      bogus: { cpu: null, mode: null },
    });
    expect(ok(res).spec).toEqual({
      mode: 'fast',
      note: 'n',
      limits: { cpu: '1' },
      items: [{ weight: 5 }, { weight: 1 }],
    });
  });

  it('a default added by a CRD update shows on GET, LIST and WATCH without a write; a finalizer-only patch keeps generation', async () => {
    const k = await kind({ type: 'object', properties: { color: { type: 'string' } } });
    const created = ok(await k.create('d3', { color: 'red' }));
    const path = `/apis/${GROUP}/v1/namespaces/default/${k.plural}`;
    const rv = created.metadata.resourceVersion;
    await k.reschema({
      type: 'object',
      properties: { color: { type: 'string' }, mode: { type: 'string', default: 'fast' } },
    });
    const read = await call<Obj>('GET', `${path}/d3`);
    expect(read.body.spec).toEqual({ color: 'red', mode: 'fast' });
    expect(read.body.metadata.resourceVersion).toBe(rv);
    const list = await call<{ items: Obj[] }>('GET', path);
    expect(list.body.items.map((o) => o.spec)).toEqual([{ color: 'red', mode: 'fast' }]);
    const watch = await readWatch(`${server.url}${path}?watch=1`, { count: 1 });
    expect(watch.events[0]?.object.spec).toEqual({ color: 'red', mode: 'fast' });
    // The stored object, defaulted as it is read, equals the patched one but for the finalizer.
    const patched = ok(
      await call<Obj & Status>(
        'PATCH',
        `${path}/d3`,
        { metadata: { finalizers: ['schema.hookgate.dev/cleanup'] } },
        MERGE,
      ),
      200,
    );
    expect(patched.metadata).toMatchObject({ generation: 1 });
    expect(patched.spec).toEqual({ color: 'red', mode: 'fast' });
  });

  it('an empty patch after a new default stores it (etcd compares the stored bytes) without bumping generation', async () => {
    const k = await kind({ type: 'object', properties: { color: { type: 'string' } } });
    const created = ok(await k.create('d4', { color: 'red' }));
    await k.reschema({
      type: 'object',
      properties: { color: { type: 'string' }, mode: { type: 'string', default: 'fast' } },
    });
    const first = ok(await k.patch('d4', {}), 200);
    expect(first.metadata.resourceVersion).not.toBe(created.metadata.resourceVersion);
    expect(first.metadata).toMatchObject({ generation: 1 });
    const second = ok(await k.patch('d4', {}), 200);
    expect(second.metadata.resourceVersion).toBe(first.metadata.resourceVersion);
  });
});

describe('validation messages', () => {
  const schema = {
    type: 'object',
    required: ['name'],
    properties: {
      name: { type: 'string', maxLength: 63 },
      methods: { type: 'array', maxItems: 3, items: { type: 'string', enum: ['GET', 'POST'] } },
      path: { type: 'string', pattern: '^/.*$' },
      replicas: { type: 'integer', minimum: 1 },
      ratio: { type: 'number', exclusiveMaximum: true, maximum: 1000000 },
      timeout: { type: 'string', format: 'duration' },
      shape: { type: 'string', format: 'no-such-format' },
      port: {
        'x-kubernetes-int-or-string': true,
        anyOf: [{ type: 'integer' }, { type: 'string' }],
      },
    },
  };

  it('words each keyword as the API server does', async () => {
    const k = await kind(schema);
    const res = await k.create('v1', {
      methods: ['GETT', 'POST', 'GET', 'POST'],
      path: 'x',
      replicas: 0,
      ratio: 1000000,
      timeout: 'soon',
    });
    expect(causes(res)).toEqual([
      'spec.methods[0]: Unsupported value: "GETT": supported values: "GET", "POST"',
      'spec.methods: Too many: 4: must have at most 3 items',
      `spec.path: Invalid value: "x": spec.path in body should match '^/.*$'`,
      'spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1',
      'spec.ratio: Invalid value: 1000000: spec.ratio in body should be less than 1000000',
      'spec.timeout: Invalid value: "soon": spec.timeout in body must be of type duration: "soon"',
      'spec.name: Required value',
    ]);
    expect(res.body.message).toMatch(
      /^Kind\d+\.schema\.hookgate\.dev "v1" is invalid: \[spec\.methods\[0\]: /,
    );
    expect(
      causes(await k.create('v2', { name: 'x'.repeat(64), replicas: '3', port: true })),
    ).toEqual([
      'spec.name: Too long: may not be more than 63 bytes',
      'spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"',
      'spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean"',
      '<nil>: Invalid value: "": "spec.port" must validate at least one schema (anyOf)',
      'spec.port: Invalid value: "boolean": spec.port in body must be of type integer: "boolean"',
    ]);
  });

  it('accepts Go durations, int-or-string values and formats the API server does not check', async () => {
    const k = await kind(schema);
    ok(await k.create('v3', { name: 'a', timeout: '1m30s', shape: 'anything', port: 'http' }));
    ok(await k.create('v4', { name: 'a', timeout: '3 days', port: 8080 }));
  });

  it('prints floats as Go does', () => {
    expect([
      goFloat(1.5),
      goFloat(1e6),
      goFloat(1234567.5),
      goFloat(0.00001),
      goFloat(0.0001),
    ]).toEqual(['1.5', '1e+06', '1.2345675e+06', '1e-05', '0.0001']);
    expect(
      validateSchema(
        { x: 0.5 },
        { type: 'object', properties: { x: { type: 'number', minimum: 1.25 } } },
      ),
    ).toEqual([
      {
        field: 'x',
        reason: 'FieldValueInvalid',
        message: 'Invalid value: 0.5: x in body should be greater than or equal to 1.25',
      },
    ]);
  });
});

describe('list types', () => {
  const schema = {
    type: 'object',
    properties: {
      ports: {
        type: 'array',
        'x-kubernetes-list-type': 'map',
        'x-kubernetes-list-map-keys': ['name', 'protocol'],
        items: {
          type: 'object',
          required: ['name'],
          properties: {
            name: { type: 'string' },
            protocol: { type: 'string', default: 'TCP' },
            port: { type: 'integer' },
          },
        },
      },
      zones: { type: 'array', 'x-kubernetes-list-type': 'set', items: { type: 'string' } },
    },
  };

  it('refuses duplicate keys in a map list (defaulted keys included) and duplicate values in a set', async () => {
    const k = await kind(schema);
    const res = await k.create('l1', {
      ports: [
        { name: 'http', port: 80 },
        { name: 'http', protocol: 'UDP', port: 80 },
        { name: 'http', protocol: 'TCP', port: 8080 },
      ],
      zones: ['a', 'b', 'a', 'a'],
    });
    expect(causes(res)).toEqual([
      'spec.ports[2]: Duplicate value: {"name":"http","protocol":"TCP"}',
      'spec.zones[2]: Duplicate value: "a"',
    ]);
    ok(await k.create('l2', { ports: [{ name: 'http' }, { name: 'http', protocol: 'UDP' }] }));
  });
});

describe('CEL rules', () => {
  it('a transition rule is skipped on create and enforced on update; optionalOldSelf runs on create too', async () => {
    const k = await kind({
      type: 'object',
      properties: {
        size: {
          type: 'integer',
          'x-kubernetes-validations': [{ rule: 'self >= oldSelf', message: 'size may only grow' }],
        },
        level: {
          type: 'integer',
          'x-kubernetes-validations': [
            {
              rule: 'oldSelf.hasValue() ? self >= oldSelf.value() : self <= 3',
              optionalOldSelf: true,
              message: 'level starts at most at 3 and may only grow',
            },
          ],
        },
      },
    });
    ok(await k.create('c1', { size: 5, level: 2 }));
    expect(causes(await k.create('c2', { size: 5, level: 4 }))).toEqual([
      'spec.level: Invalid value: 4: level starts at most at 3 and may only grow',
    ]);
    expect(causes(await k.patch('c1', { size: 4 }))).toEqual([
      'spec.size: Invalid value: 4: size may only grow',
    ]);
    ok(await k.patch('c1', { size: 6, level: 7 }), 200);
    expect(causes(await k.patch('c1', { level: 6 }))).toEqual([
      'spec.level: Invalid value: 6: level starts at most at 3 and may only grow',
    ]);
  });

  it('map-list items correlate with their old item by key, whatever the order', async () => {
    const k = await kind({
      type: 'object',
      properties: {
        ports: {
          type: 'array',
          'x-kubernetes-list-type': 'map',
          'x-kubernetes-list-map-keys': ['name'],
          items: {
            type: 'object',
            required: ['name'],
            properties: { name: { type: 'string' }, port: { type: 'integer' } },
            'x-kubernetes-validations': [
              { rule: 'self.port == oldSelf.port', message: 'port is immutable' },
            ],
          },
        },
      },
    });
    ok(
      await k.create('c3', {
        ports: [
          { name: 'a', port: 1 },
          { name: 'b', port: 2 },
        ],
      }),
    );
    ok(
      await k.patch('c3', {
        ports: [
          { name: 'b', port: 2 },
          { name: 'c', port: 9 },
          { name: 'a', port: 1 },
        ],
      }),
      200,
    );
    expect(
      causes(
        await k.patch('c3', {
          ports: [
            { name: 'a', port: 1 },
            { name: 'b', port: 3 },
          ],
        }),
      ),
    ).toEqual(['spec.ports[1]: Invalid value: port is immutable']);
  });

  it('sets compare equal in any order, but a rule indexing a set sees the stored order', async () => {
    const k = await kind({
      type: 'object',
      properties: {
        zones: {
          type: 'array',
          'x-kubernetes-list-type': 'set',
          items: { type: 'string' },
          'x-kubernetes-validations': [
            { rule: 'self == oldSelf', message: 'zones are immutable' },
            { rule: "self.size() == 0 || self[0] != 'z'", message: 'z may not come first' },
          ],
        },
      },
    });
    ok(await k.create('c4', { zones: ['b', 'a'] }));
    ok(await k.patch('c4', { zones: ['a', 'b'] }), 200);
    expect(causes(await k.create('c5', { zones: ['z', 'a'] }))).toEqual([
      'spec.zones: Invalid value: z may not come first',
    ]);
    ok(await k.create('c6', { zones: ['a', 'z'] }));
  });

  it('types values by the schema (number is double, integer is int), escapes field names and shows the root its metadata.name', async () => {
    const k = await kind(
      {
        type: 'object',
        properties: {
          ratio: { type: 'number', 'x-kubernetes-validations': [{ rule: 'self * 1.5 <= 3.0' }] },
          count: { type: 'integer', 'x-kubernetes-validations': [{ rule: 'self % 2 == 0' }] },
          'x-mode': { type: 'string' },
          labels: {
            type: 'object',
            additionalProperties: {
              type: 'string',
              'x-kubernetes-validations': [{ rule: 'self.size() <= 3', message: 'too long' }],
            },
          },
        },
        'x-kubernetes-validations': [
          { rule: "!has(self.x__dash__mode) || self.x__dash__mode != 'off'", fieldPath: '.x-mode' },
        ],
      },
      {
        'x-kubernetes-validations': [
          { rule: "self.metadata.name.startsWith('ok-')", message: 'name must start with ok-' },
        ],
      },
    );
    ok(await k.create('ok-1', { ratio: 2, count: 4, 'x-mode': 'on' }));
    // A node's own rules come before those of its fields.
    expect(
      causes(
        await k.create('ok-2', { ratio: 3, count: 3, 'x-mode': 'off', labels: { a: 'toolong' } }),
      ),
    ).toEqual([
      `spec.x-mode: Invalid value: failed rule: !has(self.x__dash__mode) || self.x__dash__mode != 'off'`,
      'spec.ratio: Invalid value: 3: failed rule: self * 1.5 <= 3.0',
      'spec.count: Invalid value: 3: failed rule: self % 2 == 0',
      'spec.labels[a]: Invalid value: "toolong": too long',
    ]);
    expect(causes(await k.create('bad', {}))).toEqual([
      '<nil>: Invalid value: name must start with ok-',
    ]);
  });

  it('rules still run after a non-blocking error; a blocking one skips them with a cause of its own', async () => {
    const k = await kind({
      type: 'object',
      properties: {
        path: { type: 'string', pattern: '^/' },
        kind: { type: 'string', enum: ['a', 'b'] },
        n: { type: 'integer' },
      },
      'x-kubernetes-validations': [{ rule: 'has(self.n)', message: 'n is required' }],
    });
    expect(causes(await k.create('c7', { path: 'x' }))).toEqual([
      `spec.path: Invalid value: "x": spec.path in body should match '^/'`,
      'spec: Invalid value: n is required',
    ]);
    expect(causes(await k.create('c8', { kind: 'c' }))).toEqual([
      'spec.kind: Unsupported value: "c": supported values: "a", "b"',
      '<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation',
    ]);
  });

  it('reason, fieldPath and messageExpression shape the cause', async () => {
    const k = await kind({
      type: 'object',
      properties: { min: { type: 'integer' }, max: { type: 'integer' } },
      'x-kubernetes-validations': [
        {
          rule: 'self.min <= self.max',
          messageExpression: "self.min > 1000 ? 'min is far above max' : 'min exceeds max'",
          fieldPath: '.min',
          reason: 'FieldValueForbidden',
        },
        { rule: 'self.max < 100', reason: 'FieldValueRequired', message: 'max below 100' },
      ],
    });
    expect(causes(await k.create('c9', { min: 200, max: 100 }))).toEqual([
      'spec.min: Forbidden: min exceeds max',
      'spec: Required value: max below 100',
    ]);
  });
});

describe('ratcheting', () => {
  it('an update that leaves an invalid value unchanged is accepted; a failing rule on it becomes a warning', async () => {
    const loose = {
      type: 'object',
      properties: {
        name: { type: 'string', maxLength: 10 },
        tag: { type: 'string', 'x-kubernetes-validations': [{ rule: 'true' }] },
        other: { type: 'string' },
      },
    };
    const k = await kind(loose);
    ok(await k.create('r1', { name: 'abcdefgh', tag: 'old' }));
    await k.reschema({
      type: 'object',
      properties: {
        name: { type: 'string', maxLength: 5 },
        tag: {
          type: 'string',
          'x-kubernetes-validations': [{ rule: "self != 'old'", message: 'no old tags' }],
        },
        other: { type: 'string' },
      },
    });
    const res = await k.patch('r1', { other: 'x' });
    expect(ok(res, 200).spec).toEqual({ name: 'abcdefgh', tag: 'old', other: 'x' });
    expect(res.headers.get('warning')).toContain('spec.tag: Invalid value: \\"old\\": no old tags');
    // A changed value is checked again (and a Too long blocks the rules).
    expect(causes(await k.patch('r1', { name: 'abcdefghi' }))).toEqual([
      'spec.name: Too long: may not be more than 5 bytes',
      '<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation',
    ]);
  });
});

describe('CRD creation', () => {
  async function refused(spec: Schema): Promise<string[]> {
    const res = await call<Status>('POST', CRDS, crdFor(`Bad${++kinds}`, spec));
    expect(res.status, JSON.stringify(res.body)).toBe(422);
    return (res.body.details?.causes ?? []).map((c) => `${c.field ?? ''}: ${c.message}`);
  }
  // One version, so the API server reports at its internal spec.validation.
  const at = 'spec.validation.openAPIV3Schema.properties[spec]';

  it('refuses rules naming undefined fields or functions, oldSelf below an atomic or set list, and optionalOldSelf without oldSelf', async () => {
    const typo = await refused({
      type: 'object',
      properties: { name: { type: 'string' } },
      'x-kubernetes-validations': [{ rule: "self.nmae == 'x'" }],
    });
    expect(typo).toHaveLength(1);
    expect(typo[0]).toContain(
      `${at}.x-kubernetes-validations[0].rule: Invalid value: {"Rule":"self.nmae == 'x'"`,
    );
    expect(typo[0]).toContain("compilation failed: ERROR: <input>:1:5: undefined field 'nmae'");
    expect(
      (
        await refused({
          type: 'object',
          properties: {
            name: { type: 'string', 'x-kubernetes-validations': [{ rule: 'self.isEmail()' }] },
          },
        })
      )[0],
    ).toContain("undeclared reference to 'isEmail'");
    expect(
      await refused({
        type: 'object',
        properties: {
          zones: {
            type: 'array',
            'x-kubernetes-list-type': 'set',
            maxItems: 10,
            items: {
              type: 'string',
              maxLength: 10,
              'x-kubernetes-validations': [{ rule: 'self == oldSelf' }],
            },
          },
          name: {
            type: 'string',
            'x-kubernetes-validations': [{ rule: "self != ''", optionalOldSelf: true }],
          },
        },
      }),
    ).toEqual([
      `${at}.properties[zones].items.x-kubernetes-validations[0].rule: Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema within ${at}.properties[zones]`,
      `${at}.properties[name].x-kubernetes-validations[0].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule`,
    ]);
  });

  // Structural schema rules: apiserver/schema/validation.go and
  // apis/apiextensions/validation/validation.go.
  it('refuses a field without type, naming which kind of node it is', async () => {
    expect(
      await refused({ type: 'object', properties: { name: {}, list: { type: 'array' } } }),
    ).toEqual([
      `${at}.properties[list].items: Required value: must be specified`,
      `${at}.properties[name].type: Required value: must not be empty for specified object fields`,
    ]);
    expect(
      await refused({ type: 'object', properties: { list: { type: 'array', items: {} } } }),
    ).toEqual([
      `${at}.properties[list].items.type: Required value: must not be empty for specified array items`,
    ]);
    // preserve-unknown-fields or int-or-string stand in for a type.
    ok(
      await call(
        'POST',
        CRDS,
        crdFor(`Loose${++kinds}`, {
          type: 'object',
          properties: {
            any: { 'x-kubernetes-preserve-unknown-fields': true },
            port: { 'x-kubernetes-int-or-string': true },
          },
        }),
      ),
    );
  });

  it('refuses map-list keys that are neither required nor defaulted, nullable, or not item properties', async () => {
    const list = (items: Schema, keys = ['name']): Schema => ({
      type: 'object',
      properties: {
        ports: {
          type: 'array',
          'x-kubernetes-list-type': 'map',
          'x-kubernetes-list-map-keys': keys,
          items,
        },
      },
    });
    const item = { type: 'object', properties: { name: { type: 'string' } } };
    expect(await refused(list(item))).toEqual([
      `${at}.properties[ports].items.properties[name].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property`,
    ]);
    expect(
      await refused(
        list({
          type: 'object',
          nullable: true,
          required: ['name'],
          properties: { name: { type: 'string', nullable: true } },
        }),
      ),
    ).toEqual([
      `${at}.properties[ports].items.nullable: Forbidden: cannot be nullable when x-kubernetes-list-type is map`,
      `${at}.properties[ports].items.properties[name].nullable: Forbidden: this property is in x-kubernetes-list-map-keys, so it cannot be nullable`,
    ]);
    expect(await refused(list({ ...item, required: ['name'] }, ['nme']))).toEqual([
      `${at}.properties[ports].x-kubernetes-list-map-keys: Invalid value: ["nme"]: entries must all be names of item properties`,
    ]);
    // A required key, or a defaulted one, is fine.
    ok(await call('POST', CRDS, crdFor(`Keyed${++kinds}`, list({ ...item, required: ['name'] }))));
  });

  it('refuses a root metadata schema beyond name and generateName restrictions', async () => {
    const withMeta = (metadata: Schema) =>
      call<Status>(
        'POST',
        CRDS,
        crdFor(
          `Meta${++kinds}`,
          { type: 'object' },
          {
            properties: {
              spec: { type: 'object' },
              metadata,
            },
          },
        ),
      );
    const labels = await withMeta({
      type: 'object',
      properties: { labels: { type: 'object', additionalProperties: { type: 'string' } } },
    });
    expect(labels.status, JSON.stringify(labels.body)).toBe(422);
    expect(labels.body.details?.causes?.map((c) => `${c.field ?? ''}: ${c.message}`)).toEqual([
      'spec.validation.openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified',
    ]);
    const named = await withMeta({
      type: 'object',
      properties: { name: { type: 'string', maxLength: 20 } },
    });
    expect(named.status, JSON.stringify(named.body)).toBe(201);
  });

  it('refuses other structural mistakes: preserve-unknown-fields false, a nullable root, keywords in allOf, int-or-string with preserve-unknown-fields', async () => {
    expect(
      await refused({
        type: 'object',
        properties: {
          a: { type: 'object', 'x-kubernetes-preserve-unknown-fields': false },
          b: { 'x-kubernetes-int-or-string': true, 'x-kubernetes-preserve-unknown-fields': true },
          c: { type: 'string', allOf: [{ type: 'string', description: 'x' }] },
          d: { type: 'array', items: { type: 'string' }, uniqueItems: true },
          e: { type: 'strin' },
        },
      }),
    ).toEqual([
      `${at}.properties[b].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if x-kubernetes-int-or-string is true`,
      `${at}.properties[c].allOf[0].description: Forbidden: must be empty to be structural`,
      `${at}.properties[c].allOf[0].type: Forbidden: must be empty to be structural`,
      `${at}.properties[a].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined`,
      `${at}.properties[d].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic`,
      `${at}.properties[e].type: Unsupported value: "strin": supported values: "array", "boolean", "integer", "number", "object", "string"`,
    ]);
    const nullableRoot = await call<Status>(
      'POST',
      CRDS,
      crdFor(`Null${++kinds}`, { type: 'object' }, { nullable: true }),
    );
    expect(nullableRoot.status).toBe(422);
    expect(nullableRoot.body.details?.causes?.map((c) => `${c.field ?? ''}: ${c.message}`)).toEqual(
      ['spec.validation.openAPIV3Schema.nullable: Forbidden: nullable cannot be true at the root'],
    );
  });
});
