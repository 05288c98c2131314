// The test API server's CEL cost estimate and budget (testing/kube-apiserver/crd-cost.ts).
//
// Every expected figure below is derived by hand from Kubernetes' model, so the
// estimator is checked against the model rather than against itself:
// - `self` and other identifiers cost 1, a field selection 1 more, constants 0;
// - has() adds nothing (the Kubernetes environment makes presence tests free);
// - an O(1) call (size, !, <, duration(), ...) costs 1 plus its arguments;
// - a string walk costs ceil(0.1 × the largest size); the size of a string is
//   maxLength × 4 (bytes per code point), or 3 MiB − 2 = 3,145,726 when unbounded,
//   or the longest enum value; == and != walk the shorter side;
// - `x in list` costs the list's size; matches costs ceil(0.1 × (size + 1)) ×
//   ceil(0.25 × regex length);
// - a comprehension costs range + init + result + size × (condition + step), with
//   all/exists stopping on @not_strictly_false(...) (cost 2 or 3) and map/filter on
//   the constant true (cost 0);
// - a rule runs once per element of each enclosing list or map (the product of their
//   maxItems/maxProperties), or 3,145,728 / (its node's smallest JSON + 1) times when
//   one of them is unbounded; an unbounded list holds (3,145,728 − 2) / (item min + 1).
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { estimateExpressionCost } from '../../testing/kube-apiserver/cel-cost.ts';
import { declFromSchema, type SchemaNode } from '../../testing/kube-apiserver/cel-decl.ts';
import {
  crdCostErrors,
  estimateCrdCost,
  estimateSchemaCost,
  type CrdSchemas,
} from '../../testing/kube-apiserver/crd-cost.ts';
import { startKubeApiServer, type KubeApiServer } from '../../testing/kube-apiserver/index.ts';
import { client, type Obj } from './support.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const CRDS = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';

const str = (extra: Partial<SchemaNode> = {}): SchemaNode => ({ type: 'string', ...extra });
const obj = (properties: Record<string, SchemaNode>, extra: Partial<SchemaNode> = {}) =>
  ({ type: 'object', properties, ...extra }) as SchemaNode;
const list = (items: SchemaNode, extra: Partial<SchemaNode> = {}): SchemaNode => ({
  type: 'array',
  items,
  ...extra,
});

function cost(rule: string, self: SchemaNode): number {
  const decl = declFromSchema(self);
  if (!decl) throw new Error('schema has no CEL type');
  return estimateExpressionCost(rule, decl).max;
}

describe('the cost of one expression', () => {
  const cases: [string, string, SchemaNode, number][] = [
    // self 1 + .replicas 1 = 2; int > is O(1): 1 + 2 = 3
    ['an int comparison', 'self.replicas > 0', obj({ replicas: { type: 'integer' } }), 3],
    // has() is free: only self
    ['a presence test', 'has(self.replicas)', obj({ replicas: { type: 'integer' } }), 1],
    // lowerAscii: ceil(0.1 × 3,145,726) = 314,573 + target 2 = 314,575;
    // == walks the shorter side: ceil(0.1 × 3) = 1, + 314,575 = 314,576
    ['an unbounded string walk', "self.name.lowerAscii() == 'abc'", obj({ name: str() }), 314576],
    // 64 × 4 = 256 bytes: ceil(25.6) = 26 + 2 = 28; == 1 → 29
    [
      'a bounded string walk',
      "self.name.lowerAscii() == 'abc'",
      obj({ name: str({ maxLength: 64 }) }),
      29,
    ],
    // ceil(0.1 × 257) = 26 × ceil(0.25 × 8) = 2 → 52, + target 2 → 54
    ['a regex match', "self.name.matches('^[a-z]+$')", obj({ name: str({ maxLength: 64 }) }), 54],
    // enum: the longest value, 19 bytes; min(19, 9) = 9 → ceil(0.9) = 1, + 2 → 3
    [
      'an enum comparison',
      "self.mode == 'sseStream'",
      obj({ mode: str({ enum: ['a', 'waitForResponseNode'] }) }),
      3,
    ],
    // in: the list's size 64 + '*' 0 + self.origins 2 = 66
    [
      'list membership',
      "'*' in self.origins",
      obj({ origins: list(str({ maxLength: 512 }), { maxItems: 64 }) }),
      66,
    ],
    // range 2 + init 0 + result 1 + 20 × (condition 2 + step (@result 1 + (size 2 + <= 1))) = 123
    [
      'all() over a bounded list',
      'self.tags.all(t, t.size() <= 10)',
      obj({ tags: list(str({ maxLength: 10 }), { maxItems: 20 }) }),
      123,
    ],
    // (3,145,728 − 2) / (2 + 1) = 1,048,575 items × 6 + 3 = 6,291,453
    [
      'all() over an unbounded list',
      'self.tags.all(t, t.size() <= 10)',
      obj({ tags: list(str({ maxLength: 10 })) }),
      6291453,
    ],
    // filter: range 2 + init [] 10 + result 1 + 10 × (true 0 + (x > 1: 2) + max(@result + [x]:
    // 1 + 1 + 11 = 13, @result 1)) = 163; .size() 164; == 0: 1 + 164 = 165
    [
      'filter() and size()',
      'self.l.filter(x, x > 1).size() == 0',
      obj({ l: list({ type: 'integer' }, { maxItems: 10 }) }),
      165,
    ],
    // over a map's keys: 2 + 0 + 1 + 8 × (2 + (1 + (1 + ceil(0.1)))) = 43
    [
      'all() over a bounded map',
      "self.labels.all(k, k.startsWith('x'))",
      obj({ labels: { type: 'object', additionalProperties: str(), maxProperties: 8 } }),
      43,
    ],
    // duration(self) 2, duration('1h') 1, <= 1: 4
    ['a duration comparison', "duration(self) <= duration('1h')", str(), 4],
  ];

  it.each(cases)('%s: %s costs %d', (_name, rule, self, expected) => {
    expect(cost(rule, self)).toBe(expected);
  });
});

describe('the cost budget of a schema', () => {
  const sizeRule = { rule: 'self.name.size() > 0' }; // self.name 2, size 3, > 4

  it('multiplies a rule by the maxItems and maxProperties around it', () => {
    const item = obj({ name: str({ maxLength: 10 }) }, { 'x-kubernetes-validations': [sizeRule] });
    const schema = obj({
      spec: obj({
        outer: list(
          obj({
            inner: list(item, { maxItems: 4 }),
            byName: { type: 'object', additionalProperties: item, maxProperties: 10 },
          }),
          { maxItems: 5 },
        ),
      }),
    });
    const { rules, total } = estimateSchemaCost(schema, 'root');
    expect(rules.map((r) => [r.path, r.maxCost, r.cardinality, r.cost])).toEqual([
      [
        'root.properties[spec].properties[outer].items.properties[byName].additionalProperties.x-kubernetes-validations[0].rule',
        4,
        50, // 5 × 10
        200,
      ],
      [
        'root.properties[spec].properties[outer].items.properties[inner].items.x-kubernetes-validations[0].rule',
        4,
        20, // 5 × 4
        80,
      ],
    ]);
    expect(total).toBe(280);
  });

  it('under an unbounded list, counts the copies of the node that fit into 3 MiB', () => {
    // {"name":""} at least: 2 + (4 + 2 + 4) = 12 bytes → 3,145,728 / 13 = 241,979 copies.
    // lowerAscii ceil(0.1 × 512) = 52 + 2 = 54; in: 2 + 54 + list 10 = 66 → 15,970,614.
    const schema = obj({
      spec: obj({
        headers: list(
          obj(
            { name: str({ maxLength: 128 }) },
            {
              required: ['name'],
              'x-kubernetes-validations': [{ rule: "self.name.lowerAscii() in ['a', 'b']" }],
            },
          ),
        ),
      }),
    });
    const [rule] = estimateSchemaCost(schema, 'root').rules;
    expect(rule).toMatchObject({ maxCost: 66, cardinality: 241979, cost: 15970614 });
  });

  it('does not multiply a messageExpression', () => {
    // 'bad: ' + self.s: (5 + 3,145,726) × 0.1 → 314,574 + self.s 2 = 314,576, once.
    const item = obj(
      { s: str() },
      { 'x-kubernetes-validations': [{ rule: 'true', messageExpression: "'bad: ' + self.s" }] },
    );
    const { rules } = estimateSchemaCost(obj({ l: list(item, { maxItems: 100 }) }), 'root');
    expect(rules.map((r) => [r.path.split('.').pop(), r.cost])).toEqual([
      ['rule', 0],
      ['messageExpression', 314576],
    ]);
  });

  it('reports the schema where every version shares it, as the API server does', () => {
    const schema = obj({ spec: obj({ a: { type: 'integer' } }) });
    const one = estimateCrdCost({ versions: [{ schema: { openAPIV3Schema: schema } }] });
    expect(one.map((s) => s.path)).toEqual(['spec.validation.openAPIV3Schema']);
    const other = obj({ spec: obj({ b: { type: 'integer' } }) });
    const two = estimateCrdCost({
      versions: [{ schema: { openAPIV3Schema: schema } }, { schema: { openAPIV3Schema: other } }],
    });
    expect(two.map((s) => s.path)).toEqual([
      'spec.versions[0].schema.openAPIV3Schema',
      'spec.versions[1].schema.openAPIV3Schema',
    ]);
  });
});

/** A CRD of kind Probe whose spec carries the given schema. */
function probeCrd(spec: SchemaNode, plural = 'probes'): Obj {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.test.hookgate.dev` },
    spec: {
      group: 'test.hookgate.dev',
      scope: 'Namespaced',
      names: { kind: 'Probe', plural, singular: plural.replace(/s$/, ''), listKind: 'ProbeList' },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: { openAPIV3Schema: obj({ spec }) },
        },
      ],
    },
  };
}

/** 20 rules of 5,242,878 each: range 2 + result 1 + 1,048,575 × (2 + 3). */
function twentyListRules(): SchemaNode {
  return obj(
    { l: list(str()) },
    {
      'x-kubernetes-validations': Array.from({ length: 20 }, () => ({
        rule: "self.l.all(x, x.startsWith('a'))",
      })),
    },
  );
}

describe('the budget errors', () => {
  it('name every contributor over 1% (at most 4) and the total when the schema is over 100,000,000', () => {
    const spec = probeCrd(twentyListRules()).spec as CrdSchemas;
    const [schema] = estimateCrdCost(spec);
    expect(schema?.rules.map((r) => r.cost)).toEqual(Array(20).fill(5242878));
    expect(schema?.total).toBe(104857560);
    const errors = crdCostErrors(spec);
    const rulePath = (i: number) =>
      `spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[${i}].rule`;
    expect(errors).toEqual([
      ...[0, 1, 2, 3].map((i) => ({
        field: rulePath(i),
        reason: 'FieldValueForbidden',
        message:
          'Forbidden: contributed to estimated rule & messageExpression cost total exceeding cost limit for entire OpenAPIv3 schema',
      })),
      {
        field: 'spec.validation.openAPIV3Schema',
        reason: 'FieldValueForbidden',
        // Below 1.5x the factor is printed with Go's %f.
        message:
          'Forbidden: x-kubernetes-validations estimated rule & messageExpression cost total for entire OpenAPIv3 schema exceeds budget by factor of 1.048576x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)',
      },
    ]);
  });
});

describe('the in-memory API server', () => {
  let server: KubeApiServer;
  let call: ReturnType<typeof client>;
  beforeAll(async () => {
    server = await startKubeApiServer();
    call = client(server);
  });
  afterAll(async () => {
    await server.close();
  });

  interface Status {
    reason: string;
    message: string;
    details: { causes: { field: string; reason: string; message: string }[] };
  }

  it('refuses the WebhookTrigger CRD as generated before its header names were bounded', async () => {
    // The custom header rule: 2 × (ceil(0.1 × 3,145,726) + 2) + in 12 + list 10 + ! 1 +
    // startsWith 2 + ! 1 = 629,176 per header, × 32 headers = 20,133,632: 2.0x the limit.
    const fixture = parse(
      readFileSync(resolve(ROOT, 'test/fixtures/crds/webhooktriggers-unbounded.yaml'), 'utf8'),
    ) as Obj;
    const res = await call<Status>('POST', CRDS, fixture);
    expect(res.status).toBe(422);
    expect(res.body.reason).toBe('Invalid');
    const field =
      'spec.validation.openAPIV3Schema.properties[spec].properties[response].properties[headers].properties[custom].items.x-kubernetes-validations[0].rule';
    const detail =
      'Forbidden: estimated rule cost exceeds budget by factor of 2.0x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)';
    expect(res.body.message).toBe(
      `CustomResourceDefinition.apiextensions.k8s.io "webhooktriggers.hookgate.dev" is invalid: ${field}: ${detail}`,
    );
    expect(res.body.details.causes).toEqual([
      { field, reason: 'FieldValueForbidden', message: detail },
    ]);
    expect((await call('GET', `${CRDS}/webhooktriggers.hookgate.dev`)).status).toBe(404);
  });

  it('accepts the generated CRDs', async () => {
    for (const file of ['webhooktriggers.hookgate.dev.yaml', 'workflows.hookgate.dev.yaml']) {
      const crd = parse(readFileSync(resolve(ROOT, 'crds', file), 'utf8')) as Obj;
      const res = await call('POST', CRDS, crd);
      expect(res.status, file).toBe(201);
    }
  });

  it('refuses an update that takes a CRD over budget, and a CRD over the total budget', async () => {
    const created = await call<Obj>('POST', CRDS, probeCrd(obj({ n: { type: 'integer' } })));
    expect(created.status).toBe(201);
    const over = probeCrd(
      obj(
        { l: list(str()) },
        { 'x-kubernetes-validations': [{ rule: "self.l.all(x, x.contains('gpu'))" }] },
      ),
    );
    (over.metadata as Record<string, unknown>).resourceVersion = (
      created.body.metadata as { resourceVersion: string }
    ).resourceVersion;
    // contains: ceil(0.1 × 3,145,726) × ceil(0.1 × 3) per item, ~1 million items: > 100x.
    const updated = await call<Status>('PUT', `${CRDS}/probes.test.hookgate.dev`, over);
    expect(updated.status).toBe(422);
    expect(updated.body.message).toContain(
      'x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x',
    );

    const total = await call<Status>('POST', CRDS, probeCrd(twentyListRules(), 'totals'));
    expect(total.status).toBe(422);
    expect(total.body.details.causes.map((c) => c.field)).toContain(
      'spec.validation.openAPIV3Schema',
    );
  });
});
