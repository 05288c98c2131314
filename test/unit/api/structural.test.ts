// Regression tests for api/structural.ts, one block per way it used to differ from a
// real API server. Each case is also run through the test API server's own schema code
// (testing/kube-apiserver/schema) so that the expectation is not the product's alone.
import { describe, expect, it } from 'vitest';
import {
  admit,
  celCompileError,
  crdRuleErrors,
  type FieldError,
  type OpenApiSchema,
} from '../../../api/structural.ts';
import {
  crdRuleErrors as apiServerRuleErrors,
  decode,
  validateObject,
} from '../../../testing/kube-apiserver/schema/index.ts';

const str: OpenApiSchema = { type: 'string' };
const obj = (
  properties: Record<string, OpenApiSchema>,
  extra: Partial<OpenApiSchema> = {},
): OpenApiSchema => ({ type: 'object', properties, ...extra });
/** A whole resource: spec has `spec`'s schema. */
const resource = (spec: OpenApiSchema, extra: Partial<OpenApiSchema> = {}): OpenApiSchema =>
  obj({ metadata: { type: 'object' }, spec }, extra);
const doc = (spec: unknown, metadata: Record<string, unknown> = { name: 'a' }) => ({
  apiVersion: 'hookgate.dev/v1alpha1',
  kind: 'Thing',
  metadata,
  spec,
});

interface Outcome {
  value: unknown;
  unknownFields: string[];
  errors: string[];
  warnings: string[];
}
const line = (e: FieldError): string => `${e.field}: ${e.message}`;

/** The product's answer, checked against the test API server's. */
function both(input: unknown, schema: OpenApiSchema, old?: unknown): Outcome {
  const r = admit(input, schema, '', old === undefined ? undefined : { value: old });
  const ours: Outcome = {
    value: r.value,
    unknownFields: r.unknownFields,
    errors: r.errors.map(line).sort(),
    warnings: r.warnings,
  };
  const value = structuredClone(input) as Record<string, unknown>;
  const unknownFields = decode(value, schema);
  const verdict = validateObject(value, schema, old);
  expect(ours).toEqual({
    value,
    unknownFields,
    errors: verdict.errors
      .filter((e) => !e.message.includes('some validation rules were not checked'))
      .map(line)
      .sort(),
    warnings: verdict.warnings,
  });
  return ours;
}

describe('1. the root apiVersion and kind are implicit', () => {
  it('are kept and not reported, even when the schema does not list them', () => {
    const r = both(doc({ x: 'a' }), resource(obj({ x: str })));
    expect(r.unknownFields).toEqual([]);
    expect(r.value).toMatchObject({ apiVersion: 'hookgate.dev/v1alpha1', kind: 'Thing' });
    expect(r.errors).toEqual([]);
  });
});

describe('2. nulls under additionalProperties', () => {
  it('are dropped, not a type error', () => {
    const schema = resource(obj({ labels: { type: 'object', additionalProperties: str } }));
    const r = both(doc({ labels: { a: 'x', b: null } }), schema);
    expect(r.errors).toEqual([]);
    expect(r.value).toMatchObject({ spec: { labels: { a: 'x' } } });
  });
});

describe('3. x-kubernetes-embedded-resource', () => {
  const schema = resource(
    obj({
      template: {
        type: 'object',
        'x-kubernetes-embedded-resource': true,
        properties: { spec: obj({ replicas: { type: 'integer' } }) },
      },
    }),
  );
  it('keeps apiVersion, kind and metadata, pruning metadata to ObjectMeta', () => {
    const template = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'p', labels: { a: 'b' }, bogus: 1 },
      spec: { replicas: 1 },
    };
    const r = both(doc({ template }), schema);
    expect(r.unknownFields).toEqual(['spec.template.metadata.bogus']);
    expect(r.value).toMatchObject({
      spec: { template: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' } } },
    });
  });
  it('requires apiVersion and kind', () => {
    const r = both(doc({ template: { spec: {} } }), schema);
    expect(r.errors).toEqual([
      'spec.template.apiVersion: Required value',
      'spec.template.kind: Required value',
    ]);
  });
});

describe('4. format: duration is Go’s', () => {
  const schema = resource(obj({ d: { type: 'string', format: 'duration' } }));
  it.each(['1m30s', '500ms', '1h', '-1.5h', '0'])('accepts %s', (d) => {
    expect(both(doc({ d }), schema).errors).toEqual([]);
  });
  it.each(['90', 'soon', '1y'])('refuses %s', (d) => {
    expect(both(doc({ d }), schema).errors).toEqual([
      `spec.d: Invalid value: "${d}": spec.d in body must be of type duration: "${d}"`,
    ]);
  });
});

describe('5. messages as the API server words them', () => {
  const schema = resource(
    obj({
      methods: { type: 'array', maxItems: 2, items: { type: 'string', enum: ['GET', 'POST'] } },
      name: { type: 'string', maxLength: 3 },
      path: { type: 'string', pattern: '^/' },
      n: { type: 'integer', minimum: 1 },
    }),
  );
  it('enum, pattern, maxItems, maxLength, minimum, type', () => {
    const r = both(
      doc({ methods: ['GETT', 'GET', 'POST'], name: 'toolong', path: 'x', n: 0 }),
      schema,
    );
    expect(r.errors).toEqual([
      'spec.methods: Too many: 3: must have at most 2 items',
      'spec.methods[0]: Unsupported value: "GETT": supported values: "GET", "POST"',
      'spec.n: Invalid value: 0: spec.n in body should be greater than or equal to 1',
      'spec.name: Too long: may not be more than 3 bytes',
      `spec.path: Invalid value: "x": spec.path in body should match '^/'`,
    ]);
    expect(both(doc({ n: 'x' }), schema).errors).toEqual([
      'spec.n: Invalid value: "string": spec.n in body must be of type integer: "string"',
    ]);
  });
});

describe('6. CEL rules after schema errors', () => {
  const schema = resource(
    obj(
      {
        path: { type: 'string', pattern: '^/' },
        mode: { type: 'string', enum: ['a', 'b'] },
      },
      { 'x-kubernetes-validations': [{ rule: "self.path != '/no'", message: 'no' }] },
    ),
  );
  it('still run after a non-blocking error (pattern)', () => {
    expect(both(doc({ path: 'x' }), schema).errors).toHaveLength(1);
    const r = both(doc({ path: 'x', mode: 'a' }), schema);
    expect(r.errors).toHaveLength(1);
    expect(both(doc({ path: '/no' }), schema).errors).toEqual(['spec: Invalid value: no']);
  });
  it('are skipped after a blocking one (enum)', () => {
    const r = both(doc({ path: '/no', mode: 'c' }), schema);
    expect(r.errors).toEqual(['spec.mode: Unsupported value: "c": supported values: "a", "b"']);
  });
  it('run beside a minLength error', () => {
    const s2 = resource(
      obj(
        { name: { type: 'string', minLength: 3 } },
        { 'x-kubernetes-validations': [{ rule: "self.name != 'x'", message: 'not x' }] },
      ),
    );
    expect(both(doc({ name: 'x' }), s2).errors).toEqual([
      'spec.name: Invalid value: "x": spec.name in body should be at least 3 chars long',
      'spec: Invalid value: not x',
    ]);
  });
});

describe('7. set lists keep their order for rules', () => {
  const schema = resource(
    obj({
      tags: {
        type: 'array',
        items: str,
        'x-kubernetes-list-type': 'set',
        'x-kubernetes-validations': [
          { rule: "self[0] != 'z'", message: 'z first' },
          { rule: 'self == oldSelf', message: 'immutable' },
        ],
      },
    }),
  );
  it('self[0] is the first item as written', () => {
    expect(both(doc({ tags: ['z', 'a'] }), schema).errors).toEqual([
      'spec.tags: Invalid value: z first',
    ]);
    expect(both(doc({ tags: ['a', 'z'] }), schema).errors).toEqual([]);
  });
  it('equality ignores the order', () => {
    const old = doc({ tags: ['a', 'b'] });
    expect(both(doc({ tags: ['b', 'a'] }), schema, old).errors).toEqual([]);
    expect(both(doc({ tags: ['a', 'c'] }), schema, old).errors).toEqual([
      'spec.tags: Invalid value: immutable',
    ]);
  });
});

describe('8. number fields are CEL doubles', () => {
  it('a whole value still multiplies by 1.5', () => {
    const schema = resource(
      obj({
        ratio: { type: 'number', 'x-kubernetes-validations': [{ rule: 'self * 1.5 <= 3.0' }] },
      }),
    );
    expect(both(doc({ ratio: 2 }), schema).errors).toEqual([]);
    expect(both(doc({ ratio: 3 }), schema).errors).toEqual([
      'spec.ratio: Invalid value: 3: failed rule: self * 1.5 <= 3.0',
    ]);
  });
});

describe('9. root rules see the object’s metadata', () => {
  it('self.metadata.name, apiVersion and kind', () => {
    const schema = resource(obj({}), {
      'x-kubernetes-validations': [
        { rule: "self.metadata.name.startsWith('a') && self.kind == 'Thing'", message: 'name' },
      ],
    });
    expect(both(doc({}, { name: 'abc' }), schema).errors).toEqual([]);
    expect(both(doc({}, { name: 'xyz' }), schema).errors).toEqual(['<nil>: Invalid value: name']);
  });
});

describe('10. optionalOldSelf', () => {
  const schema = resource(
    obj({
      n: {
        type: 'integer',
        'x-kubernetes-validations': [
          {
            rule: 'oldSelf.hasValue() ? self >= oldSelf.value() : self < 10',
            message: 'starts below 10, never decreases',
            optionalOldSelf: true,
          },
        ],
      },
    }),
  );
  it('runs on create, with no old value', () => {
    expect(both(doc({ n: 5 }), schema).errors).toEqual([]);
    expect(both(doc({ n: 50 }), schema).errors).toEqual([
      'spec.n: Invalid value: 50: starts below 10, never decreases',
    ]);
  });
  it('runs on update with the old value', () => {
    expect(both(doc({ n: 4 }), schema, doc({ n: 5 })).errors).toHaveLength(1);
    expect(both(doc({ n: 60 }), schema, doc({ n: 5 })).errors).toEqual([]);
  });
});

describe('11. ratcheting', () => {
  const schema = resource(
    obj({
      name: { type: 'string', maxLength: 3 },
      other: str,
      ports: {
        type: 'array',
        items: {
          type: 'integer',
          'x-kubernetes-validations': [{ rule: 'self > 0', message: 'positive' }],
        },
      },
    }),
  );
  it('an untouched invalid field does not block an update of another field', () => {
    const old = doc({ name: 'toolong', other: 'a' });
    expect(both(doc({ name: 'toolong', other: 'b' }), schema, old).errors).toEqual([]);
    expect(both(doc({ name: 'toolong2', other: 'b' }), schema, old).errors).toEqual([
      'spec.name: Too long: may not be more than 3 bytes',
    ]);
  });
  it('an unchanged value failing a rule gives a warning', () => {
    const old = doc({ ports: [0], other: 'a' });
    const r = both(doc({ ports: [0], other: 'b' }), schema, old);
    expect(r.errors).toEqual([]);
    expect(r.warnings).toEqual(['spec.ports[0]: Invalid value: 0: positive']);
  });
});

describe('12. CRD rule checks follow the schema', () => {
  const schema = resource(
    obj(
      {
        name: str,
        tags: {
          type: 'array',
          'x-kubernetes-list-type': 'set',
          items: { type: 'string', 'x-kubernetes-validations': [{ rule: 'self == oldSelf' }] },
        },
      },
      { 'x-kubernetes-validations': [{ rule: 'self.nmae == "x"' }] },
    ),
  );
  it('refuses undefined fields and oldSelf below a set list', () => {
    const ours = crdRuleErrors(schema).map((e) => e.field);
    const theirs = apiServerRuleErrors([{ schema: { openAPIV3Schema: schema } }]).map(
      (e) => e.field,
    );
    expect(ours).toEqual(theirs);
    expect(ours).toEqual([
      'spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule',
      'spec.validation.openAPIV3Schema.properties[spec].properties[tags].items.x-kubernetes-validations[0].rule',
    ]);
    const spec = schema.properties?.spec;
    expect(celCompileError('self.nmae == "x"', spec)).toContain("undefined field 'nmae'");
    expect(celCompileError('self.name == "x"', spec)).toBeUndefined();
    expect(celCompileError('self.metadata.name == "x"', schema, true)).toBeUndefined();
  });
});

describe('13. field names are escaped for CEL', () => {
  const schema = resource(
    obj(
      { 'x-mode': str },
      {
        'x-kubernetes-validations': [
          { rule: "has(self.x__dash__mode) && self.x__dash__mode == 'on'", message: 'on' },
        ],
      },
    ),
  );
  it('x-mode is self.x__dash__mode', () => {
    expect(both(doc({ 'x-mode': 'on' }), schema).errors).toEqual([]);
    expect(both(doc({ 'x-mode': 'off' }), schema).errors).toEqual(['spec: Invalid value: on']);
    expect(both(doc({}), schema).errors).toEqual(['spec: Invalid value: on']);
  });
});

describe('schema patterns are RE2', () => {
  const schema = resource(
    obj({
      a: { type: 'string', pattern: '(?i)^abc$' },
      b: { type: 'string', pattern: '^[[:digit:]]+$' },
    }),
  );
  it('leading flags and POSIX classes work as in Go', () => {
    expect(both(doc({ a: 'ABC', b: '123' }), schema).errors).toEqual([]);
    expect(both(doc({ a: 'abd', b: '12a' }), schema).errors).toEqual([
      `spec.a: Invalid value: "abd": spec.a in body should match '(?i)^abc$'`,
      `spec.b: Invalid value: "12a": spec.b in body should match '^[[:digit:]]+$'`,
    ]);
  });
});

describe('rules under allOf', () => {
  it('run on the node, and are checked with the CRD', () => {
    const spec = obj(
      { n: { type: 'integer' } },
      { allOf: [{ 'x-kubernetes-validations': [{ rule: 'self.n < 5', message: 'small' }] }] },
    );
    const schema = resource(spec);
    expect(both(doc({ n: 1 }), schema).errors).toEqual([]);
    // The allOf node has no type of its own, so the value is printed.
    expect(both(doc({ n: 9 }), schema).errors).toEqual(['spec: Invalid value: {"n":9}: small']);
    const bad = resource(
      obj(
        { n: { type: 'integer' } },
        { allOf: [{ 'x-kubernetes-validations': [{ rule: 'self.n <' }] }] },
      ),
    );
    expect(crdRuleErrors(bad).map((e) => e.field)).toEqual(
      apiServerRuleErrors([{ schema: { openAPIV3Schema: bad } }]).map((e) => e.field),
    );
    expect(crdRuleErrors(bad)).toHaveLength(1);
  });
});
