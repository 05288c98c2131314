// Differential test: the product's structural-schema admission (api/structural.ts) and
// the test API server's own implementation (testing/kube-apiserver/schema, written from
// Kubernetes' semantics) must answer the same objects the same way: accept or refuse,
// the same pruned and defaulted object, the same unknown fields and, where both refuse,
// errors at the same field paths. Objects are generated from our two generated CRDs,
// valid ones and mutated ones (unknown fields, nulls, wrong types, too-long strings,
// too many items, bad enum values).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { admit, type OpenApiSchema } from '../../../api/structural.ts';
import { decode, validateObject } from '../../../testing/kube-apiserver/schema/index.ts';

const root = join(import.meta.dirname, '..', '..', '..');

interface Crd {
  spec: {
    group: string;
    names: { kind: string };
    versions: { name: string; schema: { openAPIV3Schema: OpenApiSchema } }[];
  };
}

const crds = ['webhooktriggers.hookgate.dev.yaml', 'workflows.hookgate.dev.yaml'].map(
  (file) => parse(readFileSync(join(root, 'crds', file), 'utf8')) as Crd,
);

type Json = unknown;
const isObj = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

// ---------------------------------------------------------------- generation

function stringArb(s: OpenApiSchema): fc.Arbitrary<string> {
  const min = typeof s.minLength === 'number' ? s.minLength : 0;
  const max = typeof s.maxLength === 'number' ? Math.min(s.maxLength, 40) : 20;
  if (s.format === 'date-time') {
    return fc
      .date({ min: new Date('2000-01-01'), max: new Date('2099-12-31'), noInvalidDate: true })
      .map((d) => d.toISOString().replace(/\.\d+Z$/, 'Z'));
  }
  if (typeof s.pattern === 'string') {
    try {
      return fc
        .stringMatching(new RegExp(s.pattern), { size: 'xsmall' })
        .map((v) => (v.length > max ? v.slice(0, max) : v));
    } catch {
      // a pattern fast-check cannot generate from: any string
    }
  }
  return fc.string({ minLength: min, maxLength: Math.max(min, max) });
}

function valueArb(s: OpenApiSchema | undefined, depth: number): fc.Arbitrary<Json> {
  if (!s) return fc.constant('x');
  if (Array.isArray(s.enum) && s.enum.length > 0) return fc.constantFrom(...s.enum);
  if (s['x-kubernetes-preserve-unknown-fields'] && !s.properties) {
    return fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.parse(JSON.stringify(v)) as Json);
  }
  switch (s.type) {
    case 'string':
      return stringArb(s);
    case 'integer':
      return fc.integer({
        min: typeof s.minimum === 'number' ? s.minimum : -5,
        max: typeof s.maximum === 'number' ? Math.min(s.maximum, 2 ** 31) : 1000,
      });
    case 'number':
      return fc.double({ min: -1000, max: 1000, noNaN: true });
    case 'boolean':
      return fc.boolean();
    case 'array':
      return arrayArb(s, depth);
    case 'object':
      return objectArb(s, depth);
    default:
      return fc.constant(null);
  }
}

function arrayArb(s: OpenApiSchema, depth: number): fc.Arbitrary<Json> {
  const minLength = typeof s.minItems === 'number' ? s.minItems : 0;
  const maxLength = Math.max(
    minLength,
    Math.min(typeof s.maxItems === 'number' ? s.maxItems : 3, 3),
  );
  if (depth > 4) return fc.constant([]);
  const item = valueArb(s.items, depth + 1);
  const type = s['x-kubernetes-list-type'];
  if (type === 'set') {
    return fc.uniqueArray(item, { minLength, maxLength, selector: (v) => JSON.stringify(v) });
  }
  if (type === 'map') {
    const keys = s['x-kubernetes-list-map-keys'] ?? [];
    return fc.uniqueArray(item, {
      minLength,
      maxLength,
      selector: (v) => JSON.stringify(keys.map((k) => (isObj(v) ? v[k] : null))),
    });
  }
  return fc.array(item, { minLength, maxLength });
}

function objectArb(s: OpenApiSchema, depth: number): fc.Arbitrary<Json> {
  if (depth > 5) return fc.constant({});
  if (!s.properties) {
    if (isObj(s.additionalProperties)) {
      return fc.dictionary(
        fc.stringMatching(/^[a-z][a-z0-9-]{0,8}$/),
        valueArb(s.additionalProperties, depth + 1),
        { maxKeys: 2 },
      );
    }
    return fc.constant({});
  }
  const model: Record<string, fc.Arbitrary<Json>> = {};
  for (const [k, sub] of Object.entries(s.properties)) model[k] = valueArb(sub, depth + 1);
  const required = s.required ?? [];
  // Optional fields conflict through CEL rules (exactly one of a and b, ...): objects
  // with few of them reach the accepting paths (defaults) more often.
  const few = fc
    .shuffledSubarray(Object.keys(model), { maxLength: Math.min(2, Object.keys(model).length) })
    .chain((keys) =>
      fc.record(
        Object.fromEntries(
          Object.entries(model).filter(([k]) => required.includes(k) || keys.includes(k)),
        ),
      ),
    );
  return fc.oneof(fc.record(model, { requiredKeys: required }), few);
}

/** A whole object of the CRD's kind, its spec (and sometimes status) from the schema. */
function objectOf(crd: Crd): fc.Arbitrary<Record<string, Json>> {
  const schema = crd.spec.versions[0]!.schema.openAPIV3Schema;
  const props = schema.properties ?? {};
  return fc
    .record(
      {
        spec: valueArb(props.spec, 1),
        status: valueArb(props.status, 1),
        name: fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/),
      },
      { requiredKeys: ['spec', 'name'] },
    )
    .map(({ spec, status, name }) => ({
      apiVersion: `${crd.spec.group}/${crd.spec.versions[0]!.name}`,
      kind: crd.spec.names.kind,
      metadata: { name, namespace: 'default' },
      spec,
      ...(status === undefined ? {} : { status }),
    }));
}

// ---------------------------------------------------------------- mutation

const MUTATIONS = ['unknown', 'null', 'wrongType', 'tooLong', 'tooMany', 'badEnum'] as const;
type Mutation = (typeof MUTATIONS)[number];

interface Site {
  parent: Record<string, unknown> | unknown[] | undefined;
  key: string | number;
  value: unknown;
  schema: OpenApiSchema | undefined;
}

/** Every place of the object, with its schema (the root has no parent). */
function sites(obj: Record<string, unknown>, schema: OpenApiSchema): Site[] {
  const out: Site[] = [{ parent: undefined, key: '', value: obj, schema }];
  const walk = (x: unknown, s: OpenApiSchema | undefined): void => {
    if (Array.isArray(x)) {
      x.forEach((v, i) => {
        out.push({ parent: x, key: i, value: v, schema: s?.items });
        walk(v, s?.items);
      });
    } else if (isObj(x)) {
      for (const [k, v] of Object.entries(x)) {
        if (k === 'metadata' || k === 'apiVersion' || k === 'kind') continue;
        const sub =
          s?.properties?.[k] ??
          (isObj(s?.additionalProperties) ? s.additionalProperties : undefined);
        out.push({ parent: x, key: k, value: v, schema: sub });
        walk(v, sub);
      }
    }
  };
  walk(obj, schema);
  return out;
}

function set(site: Site, value: unknown): void {
  if (Array.isArray(site.parent)) site.parent[site.key as number] = value;
  else if (site.parent) site.parent[site.key as string] = value;
}

function wrongType(v: unknown): unknown {
  if (typeof v === 'string') return 42;
  if (typeof v === 'number') return String(v);
  if (typeof v === 'boolean') return 'true';
  if (Array.isArray(v)) return { item: v[0] ?? 'x' };
  if (isObj(v)) return ['x'];
  return 1.5;
}

function mutate(
  obj: Record<string, unknown>,
  schema: OpenApiSchema,
  kind: Mutation,
  pick: number,
): void {
  const all = sites(obj, schema);
  const fits = (site: Site): boolean => {
    switch (kind) {
      case 'unknown':
        return isObj(site.value);
      case 'tooLong':
        return typeof site.value === 'string';
      case 'tooMany':
        return Array.isArray(site.value);
      case 'badEnum':
        return Array.isArray(site.schema?.enum);
      default:
        return site.parent !== undefined;
    }
  };
  const candidates = all.filter(fits);
  const site = candidates[pick % Math.max(candidates.length, 1)];
  if (!site) return;
  switch (kind) {
    case 'unknown':
      (site.value as Record<string, unknown>).zzUnknown = { a: 1 };
      return;
    case 'null':
      return set(site, null);
    case 'wrongType':
      return set(site, wrongType(site.value));
    case 'tooLong': {
      const max = typeof site.schema?.maxLength === 'number' ? site.schema.maxLength : 300;
      return set(site, 'a'.repeat(max + 1));
    }
    case 'tooMany': {
      const list = site.value as unknown[];
      const max = typeof site.schema?.maxItems === 'number' ? site.schema.maxItems : 40;
      const filler = list[0] ?? 'x';
      while (list.length <= max) list.push(structuredClone(filler));
      return;
    }
    case 'badEnum':
      return set(site, `${String(site.value)}X`);
  }
}

// ---------------------------------------------------------------- comparison

interface Answer {
  accepted: boolean;
  value: unknown;
  unknownFields: string[];
  fields: string[];
  messages: string[];
}

const NOT_CHECKED = 'some validation rules were not checked';

function product(obj: unknown, schema: OpenApiSchema, old?: unknown): Answer {
  const r = admit(obj, schema, '', old === undefined ? undefined : { value: old });
  return {
    accepted: r.unknownFields.length === 0 && r.errors.length === 0,
    value: r.value,
    unknownFields: r.unknownFields,
    fields: [...new Set(r.errors.map((e) => e.field))].sort(),
    messages: r.errors.map((e) => `${e.field}: ${e.message}`).sort(),
  };
}

function apiServer(obj: unknown, schema: OpenApiSchema, old?: unknown): Answer {
  const value = structuredClone(obj) as Record<string, unknown>;
  const unknownFields = decode(value, schema);
  const errors = validateObject(value, schema, old).errors.filter(
    (e) => !e.message.includes(NOT_CHECKED),
  );
  return {
    accepted: unknownFields.length === 0 && errors.length === 0,
    value,
    unknownFields,
    fields: [...new Set(errors.map((e) => e.field))].sort(),
    messages: errors.map((e) => `${e.field}: ${e.message}`).sort(),
  };
}

type Figures = {
  cases: number;
  accepted: number;
  refused: number;
  agreed: number;
  sameMessages: number;
};
const figures: Record<string, Figures> = {};

function compare(
  mode: string,
  obj: Record<string, unknown>,
  schema: OpenApiSchema,
  old?: unknown,
): void {
  const ours = product(obj, schema, old);
  const theirs = apiServer(obj, schema, old);
  const f = (figures[mode] ??= { cases: 0, accepted: 0, refused: 0, agreed: 0, sameMessages: 0 });
  f.cases++;
  expect({ accepted: ours.accepted, object: obj, errors: ours.messages }).toEqual({
    accepted: theirs.accepted,
    object: obj,
    errors: theirs.messages,
  });
  expect(ours.unknownFields).toEqual(theirs.unknownFields);
  expect(ours.value).toEqual(theirs.value);
  if (!ours.accepted) expect(ours.fields).toEqual(theirs.fields);
  f.agreed++;
  if (ours.accepted) f.accepted++;
  else f.refused++;
  if (JSON.stringify(ours.messages) === JSON.stringify(theirs.messages)) f.sameMessages++;
}

// DIFF_RUNS and DIFF_SEED explore further (the defaults keep CI runs fixed and short).
const RUNS = Number(process.env.DIFF_RUNS ?? 200);
const SEED = Number(process.env.DIFF_SEED ?? 0);

describe('structural admission agrees with the test API server', () => {
  afterAll(() => {
    console.log(`structural vs apiserver: ${JSON.stringify(figures)}`);
  });

  for (const crd of crds) {
    const kind = crd.spec.names.kind;
    const schema = crd.spec.versions[0]!.schema.openAPIV3Schema;

    it(`${kind}: generated objects`, () => {
      fc.assert(
        fc.property(objectOf(crd), (obj) => compare(`${kind} generated`, obj, schema)),
        { numRuns: RUNS, seed: SEED + 1 },
      );
    });

    it(`${kind}: mutated objects`, () => {
      fc.assert(
        fc.property(
          objectOf(crd),
          fc.constantFrom(...MUTATIONS),
          fc.nat(),
          fc.integer({ min: 1, max: 2 }),
          (obj, mutation, pick, times) => {
            for (let i = 0; i < times; i++) mutate(obj, schema, mutation, pick + i * 7);
            compare(`${kind} mutated`, obj, schema);
          },
        ),
        { numRuns: RUNS * 2, seed: SEED + 2 },
      );
    });

    it(`${kind}: updates (ratcheting against the stored object)`, () => {
      fc.assert(
        fc.property(
          objectOf(crd),
          fc.constantFrom(...MUTATIONS),
          fc.nat(),
          fc.constantFrom(...MUTATIONS),
          fc.nat(),
          (obj, storedMutation, storedPick, mutation, pick) => {
            // The stored object may itself be invalid (stored before a CRD change).
            mutate(obj, schema, storedMutation, storedPick);
            const stored = structuredClone(obj);
            decode(stored, schema);
            const update = structuredClone(stored);
            mutate(update, schema, mutation, pick);
            compare(`${kind} updated`, update, schema, stored);
          },
        ),
        { numRuns: RUNS, seed: SEED + 3, endOnFailure: true },
      );
    });
  }
});
