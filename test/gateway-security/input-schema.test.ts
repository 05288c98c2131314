import { describe, expect, it } from 'vitest';
import type { SchemaSpec } from '../../api/v1alpha1/index.ts';
import {
  compileSchemas,
  inferSchema,
  type CompiledSchemas,
  type ValidateFn,
} from '../../api/schemas.ts';
import { schemasFor, validateInput } from '../../runtime/gateway/body/schemas.ts';
import { makeRoute, problemOf } from './fixtures.ts';

function compiled(schema: SchemaSpec): CompiledSchemas {
  const result = compileSchemas(schema);
  if ('error' in result) throw new Error(`unexpected config error: ${result.error}`);
  return result;
}

const manual: SchemaSpec = {
  mode: 'manual',
  input: {
    fields: [
      { name: 'orderId', type: 'string', required: true, value: 'o-1' },
      { name: 'amount', type: 'number', required: true },
      { name: 'quantity', type: 'integer', required: false },
      { name: 'gift', type: 'boolean', required: false },
      { name: 'customer', type: 'object', required: false },
      { name: 'items', type: 'array', required: false },
    ],
  },
};

async function violations(validate: ValidateFn | undefined, body: unknown) {
  const problem = await problemOf(() => validateInput(validate, body));
  expect(problem.code).toBe('HG_ERR_SCHEMA_VALIDATION');
  expect(problem.status).toBe(422);
  return problem.extensions.errors as { pointer: string; detail: string }[];
}

describe('manual mode', () => {
  const { input, output } = compiled(manual);

  it('builds an object schema from the fields; no output fields → no output validator', () => {
    expect(input?.schema).toEqual({
      type: 'object',
      properties: {
        orderId: { type: 'string' },
        amount: { type: 'number' },
        quantity: { type: 'integer' },
        gift: { type: 'boolean' },
        customer: { type: 'object' },
        items: { type: 'array' },
      },
      required: ['orderId', 'amount'],
    });
    expect(output).toBeUndefined();
  });

  it('accepts a matching body, with extra properties and optional fields absent', () => {
    expect(() =>
      validateInput(input, { orderId: 'o-1', amount: 9.5, quantity: 2, extra: 'ok' }),
    ).not.toThrow();
    // `value` is an example, not a constant
    expect(() => validateInput(input, { orderId: 'other', amount: 1 })).not.toThrow();
  });

  it('missing required fields point at each field', async () => {
    expect(await violations(input, {})).toEqual([
      { pointer: '/orderId', detail: 'is required' },
      { pointer: '/amount', detail: 'is required' },
    ]);
  });

  it('a wrong type is reported for each field type, all at once', async () => {
    const errors = await violations(input, {
      orderId: 12,
      amount: '9.5',
      quantity: 1.5,
      gift: 'yes',
      customer: [],
      items: {},
    });
    expect(errors).toEqual([
      { pointer: '/orderId', detail: 'must be string' },
      { pointer: '/amount', detail: 'must be number' },
      { pointer: '/quantity', detail: 'must be integer' },
      { pointer: '/gift', detail: 'must be boolean' },
      { pointer: '/customer', detail: 'must be object' },
      { pointer: '/items', detail: 'must be array' },
    ]);
  });

  it('null is not a value of any declared type', async () => {
    expect(await violations(input, { orderId: null, amount: 1 })).toEqual([
      { pointer: '/orderId', detail: 'must be string' },
    ]);
  });

  it('a non-object body is one type error at the root pointer', async () => {
    for (const body of ['text', 42, [1, 2], null, true]) {
      expect(await violations(input, body)).toEqual([{ pointer: '', detail: 'must be object' }]);
    }
  });

  it('no fields → no validator; validateInput without a validator accepts anything', () => {
    expect(compiled({ mode: 'manual' })).toEqual({});
    expect(compiled({ mode: 'manual', input: { fields: [] } })).toEqual({});
    expect(() => validateInput(undefined, 'anything')).not.toThrow();
  });

  it('the problem detail counts the violations', async () => {
    const problem = await problemOf(() => validateInput(input, {}));
    expect(problem.message).toBe('The request body does not match the input schema (2 problems).');
  });
});

describe('automatic mode while learning', () => {
  const learning = { enabled: true };
  it('has no validator for a side without jsonSchema, example or fields', () => {
    const compiled = compileSchemas({ mode: 'automatic', input: {}, output: {}, learning });
    expect(compiled).toEqual({});
  });
  it('still validates a side that has a schema', () => {
    const compiled = compileSchemas({
      mode: 'automatic',
      input: {},
      output: { example: '{"ok":true}' },
      learning,
    });
    expect('error' in compiled).toBe(false);
    expect(Object.keys(compiled)).toEqual(['output']);
  });
  it('still needs both sides, with the spec message, and valid JSON', () => {
    expect(compileSchemas({ mode: 'automatic', input: {}, learning })).toEqual({
      error: 'Please provide both input and output schemas for automatic IO mode.',
    });
    expect(
      compileSchemas({ mode: 'automatic', input: { example: '{a' }, output: {}, learning }),
    ).toEqual({ error: 'Make sure your schemas and examples are valid JSON format.' });
  });
  it('switched off, empty sides are refused as before', () => {
    expect(
      compileSchemas({ mode: 'automatic', input: {}, output: {}, learning: { enabled: false } }),
    ).toEqual({ error: 'Please provide both input and output schemas for automatic IO mode.' });
  });
});

describe('automatic mode', () => {
  it('requires both input and output (message verbatim)', () => {
    const message = 'Please provide both input and output schemas for automatic IO mode.';
    expect(compileSchemas({ mode: 'automatic' })).toEqual({ error: message });
    expect(compileSchemas({ mode: 'automatic', input: { example: '{"a":1}' } })).toEqual({
      error: message,
    });
    expect(compileSchemas({ mode: 'automatic', output: { example: '{"a":1}' } })).toEqual({
      error: message,
    });
    // an input object with nothing in it is not a schema
    expect(
      compileSchemas({ mode: 'automatic', input: { source: 'orders' }, output: { example: '{}' } }),
    ).toEqual({ error: message });
  });

  it('invalid JSON in a schema or an example (message verbatim)', () => {
    const message = 'Make sure your schemas and examples are valid JSON format.';
    const cases: SchemaSpec[] = [
      { mode: 'automatic', input: { example: '{a:1}' }, output: { example: '{}' } },
      { mode: 'automatic', input: { example: '{}' }, output: { example: '{"a":' } },
      { mode: 'automatic', input: { jsonSchema: "{'type':'object'}" }, output: { example: '{}' } },
      // jsonSchema wins, but a broken example next to it is still reported
      {
        mode: 'automatic',
        input: { jsonSchema: '{"type":"object"}', example: 'not json' },
        output: { example: '{}' },
      },
    ];
    for (const schema of cases) expect(compileSchemas(schema)).toEqual({ error: message });
  });

  it('a jsonSchema that is not a usable JSON Schema is a configuration error', () => {
    const bad = compileSchemas({
      mode: 'automatic',
      input: { jsonSchema: '{"type":"nonsense"}' },
      output: { example: '{}' },
    });
    expect(bad).toHaveProperty('error');
    expect((bad as { error: string }).error).toMatch(/^The input JSON Schema is not valid/);
    expect(
      compileSchemas({ mode: 'automatic', input: { jsonSchema: '[]' }, output: { example: '{}' } }),
    ).toEqual({ error: 'A JSON Schema must be a JSON object.' });
  });

  it('uses the jsonSchema text as given', async () => {
    const { input, output } = compiled({
      mode: 'automatic',
      input: {
        jsonSchema: JSON.stringify({
          type: 'object',
          properties: { email: { type: 'string', format: 'email' }, n: { minimum: 1 } },
          required: ['email'],
        }),
      },
      output: { jsonSchema: '{"type":"object"}' },
    });
    expect(output).toBeDefined();
    expect(() => validateInput(input, { email: 'a@example.com', n: 2 })).not.toThrow();
    expect(await violations(input, { email: 'nope', n: 0 })).toEqual([
      { pointer: '/email', detail: 'must match format "email"' },
      { pointer: '/n', detail: 'must be >= 1' },
    ]);
  });

  it('infers a schema from the example: all non-null properties required, nested too', async () => {
    const example = {
      id: 'o-1',
      total: 10,
      paid: true,
      note: null,
      customer: { name: 'Ada', tags: ['vip'] },
      lines: [{ sku: 'a', qty: 1 }],
    };
    const { input } = compiled({
      mode: 'automatic',
      input: { example: JSON.stringify(example) },
      output: { example: '{"ok":true}' },
    });
    expect(() => validateInput(input, example)).not.toThrow();
    expect(() => validateInput(input, { ...example, note: 'anything', total: 10.5 })).not.toThrow();
    expect(
      await violations(input, {
        id: 1,
        paid: 'no',
        customer: { tags: [1] },
        lines: [{ sku: 'b' }],
      }),
    ).toEqual([
      { pointer: '/total', detail: 'is required' },
      { pointer: '/id', detail: 'must be string' },
      { pointer: '/paid', detail: 'must be boolean' },
      { pointer: '/customer/name', detail: 'is required' },
      { pointer: '/customer/tags/0', detail: 'must be string' },
      { pointer: '/lines/0/qty', detail: 'is required' },
    ]);
  });

  it('inference rules for arrays and scalars', () => {
    expect(inferSchema([1, 'a'])).toEqual({ type: 'array' });
    expect(inferSchema([])).toEqual({ type: 'array' });
    expect(inferSchema([1, 2])).toEqual({ type: 'array', items: { type: 'number' } });
    expect(inferSchema('x')).toEqual({ type: 'string' });
    expect(inferSchema(null)).toEqual({});
  });

  it('pointers escape ~ and / in property names', async () => {
    const { input } = compiled({
      mode: 'automatic',
      input: { example: '{"a/b":1,"c~d":"x"}' },
      output: { example: '{}' },
    });
    expect(await violations(input, {})).toEqual([
      { pointer: '/a~1b', detail: 'is required' },
      { pointer: '/c~0d', detail: 'is required' },
    ]);
  });
});

describe('schemasFor (kept with the route record)', () => {
  it('compiles once per route record; a new record of the route is compiled anew', () => {
    const r1 = makeRoute({ schema: manual }, {}, 'shop/cache', 1);
    const first = schemasFor(r1);
    expect(first.input).toBeDefined();
    expect(schemasFor(r1)).toBe(first);
    // The route table makes a new record object only when the route changed.
    const r2 = makeRoute({ schema: { mode: 'manual' } }, {}, 'shop/cache', 2);
    expect(schemasFor(r2)).toEqual({});
    expect(schemasFor(r1)).toBe(first);
  });

  it('a route with an unusable schema answers 500', async () => {
    const bad = makeRoute({ schema: { mode: 'automatic' } }, {}, 'shop/bad', 1);
    const problem = await problemOf(() => schemasFor(bad));
    expect(problem.status).toBe(500);
  });
});
