// Multi-sample inference: varied traffic merged into one schema that every sample
// passes, in both JSON Schema dialects the product compiles.
import { Ajv } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import {
  inferFromSamples,
  MAX_DEPTH,
  MAX_PROPERTIES,
} from '../../../runtime/schema-learning/infer.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv | Ajv2020) => Ajv;

/** Every sample validates against the inferred schema, under draft-07 and 2020-12. */
function inferValid(samples: unknown[]): Record<string, unknown> {
  const schema = inferFromSamples(samples) as Record<string, unknown>;
  for (const ajv of [
    new Ajv({ strict: true, allowUnionTypes: true }),
    new Ajv2020({ strict: true, allowUnionTypes: true }),
  ]) {
    addFormats(ajv);
    const validate = ajv.compile(schema);
    for (const sample of samples) expect(validate(sample), JSON.stringify(sample)).toBe(true);
  }
  return schema;
}

describe('inferFromSamples', () => {
  it('has no schema without samples', () => {
    expect(inferFromSamples([])).toBeNull();
  });

  it('a __proto__ key is a property like any other, required when always present', () => {
    const schema = inferValid([JSON.parse('{"__proto__":{"x":1},"a":1}') as unknown]);
    expect(Object.keys(schema.properties as object)).toEqual(['__proto__', 'a']);
    expect(schema.required).toEqual(['__proto__', 'a']);
  });

  it('requires the properties present in every sample; the others are optional', () => {
    const schema = inferValid([
      { id: 1, name: 'a', note: 'x' },
      { id: 2, name: 'b' },
      { id: 3, name: 'c', tag: 'y' },
    ]);
    expect(schema).toEqual({
      type: 'object',
      properties: {
        id: { type: 'integer' },
        name: { type: 'string' },
        note: { type: 'string' },
        tag: { type: 'string' },
      },
      required: ['id', 'name'],
    });
  });

  it('describes nested objects by the same rules', () => {
    const schema = inferValid([
      { customer: { email: 'a@x', address: { city: 'Oslo' } } },
      { customer: { email: 'b@x', address: { city: 'Rome', zip: '00100' } } },
    ]);
    expect(schema.properties).toEqual({
      customer: {
        type: 'object',
        properties: {
          email: { type: 'string' },
          address: {
            type: 'object',
            properties: { city: { type: 'string' }, zip: { type: 'string' } },
            required: ['city'],
          },
        },
        required: ['email', 'address'],
      },
    });
  });

  it('merges the items of arrays of objects with differing keys', () => {
    const schema = inferValid([
      {
        items: [
          { sku: 'a', qty: 1 },
          { sku: 'b', qty: 2, gift: true },
        ],
      },
      { items: [{ sku: 'c', qty: 1, note: 'n' }] },
    ]);
    expect((schema.properties as Record<string, unknown>).items).toEqual({
      type: 'array',
      items: {
        type: 'object',
        properties: {
          sku: { type: 'string' },
          qty: { type: 'integer' },
          gift: { type: 'boolean' },
          note: { type: 'string' },
        },
        required: ['sku', 'qty'],
      },
    });
  });

  it('takes integer only when every number is an integer', () => {
    expect(inferValid([{ n: 1 }, { n: 2 }]).properties).toEqual({ n: { type: 'integer' } });
    expect(inferValid([{ n: 1 }, { n: 2.5 }]).properties).toEqual({ n: { type: 'number' } });
    expect(inferValid([[1, 2.5, 3]])).toEqual({ type: 'array', items: { type: 'number' } });
    // A float that is a whole number in JSON (1.0) parses as an integer: it is one.
    expect(inferValid([JSON.parse('{"n":1.0}')]).properties).toEqual({ n: { type: 'integer' } });
  });

  it('lists conflicting types, with each type its keywords', () => {
    const schema = inferValid([{ v: 'a' }, { v: 1 }, { v: { k: true } }, { v: [1] }]);
    expect(schema.properties).toEqual({
      v: {
        type: ['object', 'array', 'string', 'integer'],
        properties: { k: { type: 'boolean' } },
        required: ['k'],
        items: { type: 'integer' },
      },
    });
    // A value of another type is refused.
    const ajv = new Ajv();
    expect(ajv.validate(schema, { v: false })).toBe(false);
  });

  it('adds null to the types of a place where null was seen; present-but-null is present', () => {
    const schema = inferValid([{ a: null, b: 'x' }, { a: null, b: null }, { a: null }]);
    expect(schema).toEqual({
      type: 'object',
      properties: { a: { type: 'null' }, b: { type: ['string', 'null'] } },
      required: ['a'],
    });
    expect(inferValid([null, { x: 1 }])).toEqual({
      type: ['object', 'null'],
      properties: { x: { type: 'integer' } },
      required: ['x'],
    });
  });

  it('leaves the items of always-empty arrays unconstrained', () => {
    const schema = inferValid([{ tags: [] }, { tags: [] }]);
    expect(schema.properties).toEqual({ tags: { type: 'array' } });
    // Empty arrays next to full ones: the full ones give the items.
    expect(inferValid([{ tags: [] }, { tags: ['a'] }]).properties).toEqual({
      tags: { type: 'array', items: { type: 'string' } },
    });
  });

  it('gives date-time only when every string there is one', () => {
    expect(
      inferValid([{ at: '2026-11-23T18:00:00Z' }, { at: '2026-11-23T18:00:00.5+01:00' }])
        .properties,
    ).toEqual({ at: { type: 'string', format: 'date-time' } });
    expect(inferValid([{ at: '2026-11-23T18:00:00Z' }, { at: 'yesterday' }]).properties).toEqual({
      at: { type: 'string' },
    });
    // Dates, emails and URLs are not guessed.
    expect(inferValid([{ d: '2026-11-23', e: 'a@b.c' }]).properties).toEqual({
      d: { type: 'string' },
      e: { type: 'string' },
    });
  });

  it('describes scalars and top-level arrays', () => {
    expect(inferValid(['a', 'b'])).toEqual({ type: 'string' });
    expect(inferValid([true, false])).toEqual({ type: 'boolean' });
    expect(inferValid([[{ a: 1 }], [{ a: 2, b: 'x' }]])).toEqual({
      type: 'array',
      items: {
        type: 'object',
        properties: { a: { type: 'integer' }, b: { type: 'string' } },
        required: ['a'],
      },
    });
  });

  it('stops describing below the depth bound', () => {
    let deep: unknown = 'leaf';
    for (let i = 0; i < MAX_DEPTH + 10; i++) deep = { d: deep };
    const schema = inferValid([deep]);
    let level = schema;
    let depth = 0;
    while (level.properties) {
      level = (level.properties as Record<string, Record<string, unknown>>).d as Record<
        string,
        unknown
      >;
      depth++;
    }
    expect(depth).toBe(MAX_DEPTH);
    expect(level).toEqual({});
  });

  it('describes at most MAX_PROPERTIES keys per object (the object stays open)', () => {
    const wide: Record<string, number> = {};
    for (let i = 0; i < MAX_PROPERTIES + 50; i++) wide[`k${i}`] = i;
    const schema = inferValid([wide]);
    expect(Object.keys(schema.properties as object)).toHaveLength(MAX_PROPERTIES);
    expect(schema.required).toHaveLength(MAX_PROPERTIES);
  });

  it('refuses what no sample looked like', () => {
    const schema = inferValid([
      { id: 1, items: [{ sku: 'a' }] },
      { id: 2, items: [] },
    ]);
    const ajv = new Ajv();
    expect(ajv.validate(schema, { items: [] })).toBe(false); // id missing
    expect(ajv.validate(schema, { id: 'x', items: [] })).toBe(false); // id a string
    expect(ajv.validate(schema, { id: 3, items: [{}] })).toBe(false); // sku missing
    expect(ajv.validate(schema, { id: 3, items: [{ sku: 'b' }], extra: 1 })).toBe(true);
  });
});
