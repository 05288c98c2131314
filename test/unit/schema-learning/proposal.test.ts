// The proposal's manifest block: pasteable YAML, each side with samples as jsonSchema
// text, learning ended only when both sides have a schema.
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { compileSchemas } from '../../../api/schemas.ts';
import type { SchemaSpec } from '../../../api/v1alpha1/index.ts';
import { proposeSchema } from '../../../runtime/schema-learning/proposal.ts';

const learning: SchemaSpec = {
  mode: 'automatic',
  input: { source: 'crm', example: '{"old":1}' },
  output: { asset: 'json' },
  learning: { enabled: true, maxSamples: 10 },
};
const block = (manifest: string) => (parse(manifest) as { schema: SchemaSpec }).schema;

describe('proposeSchema', () => {
  it('fills jsonSchema per side, keeps source and asset, drops the example, ends learning', () => {
    const p = proposeSchema(learning, {
      requests: ['{"a":1}', '{"a":2,"b":"x"}'],
      responses: ['{"ok":true}'],
    });
    expect(p.samples).toEqual({ requests: 2, responses: 1 });
    expect(p.learning).toBe(true);
    const schema = block(p.manifest);
    expect(schema).toEqual({
      mode: 'automatic',
      input: { source: 'crm', jsonSchema: JSON.stringify(p.input, null, 2) },
      output: { asset: 'json', jsonSchema: JSON.stringify(p.output, null, 2) },
      learning: { enabled: false },
    });
    // Multi-line JSON is a YAML block scalar: readable when pasted.
    expect(p.manifest).toMatch(/jsonSchema: \|/);
    const compiled = compileSchemas(schema);
    expect('error' in compiled).toBe(false);
  });

  it('keeps learning on while a side has neither samples nor a schema', () => {
    const p = proposeSchema(learning, { requests: ['{"a":1}'], responses: [] });
    expect(p.output).toBeNull();
    const schema = block(p.manifest);
    expect(schema.output).toEqual({ asset: 'json' });
    expect(schema.learning).toEqual({ enabled: true, maxSamples: 10 });
    // Still a configuration the gateway accepts.
    expect('error' in compileSchemas(schema)).toBe(false);
  });

  it('keeps a configured side without samples, and then ends learning', () => {
    const spec: SchemaSpec = { ...learning, output: { example: '{"ok":true}' } };
    const schema = block(proposeSchema(spec, { requests: ['{"a":1}'], responses: [] }).manifest);
    expect(schema.output).toEqual({ example: '{"ok":true}' });
    expect(schema.learning).toEqual({ enabled: false });
  });

  it('has no schemas without samples', () => {
    const p = proposeSchema(learning, { requests: [], responses: [] });
    expect(p).toMatchObject({ input: null, output: null, samples: { requests: 0, responses: 0 } });
  });
});
