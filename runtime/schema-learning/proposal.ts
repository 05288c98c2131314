// The schema proposal of a learning trigger: the samples merged into one input and one
// output JSON Schema (infer.ts), and the spec.schema block to paste into the trigger's
// manifest with those schemas as jsonSchema text. The product never writes the user's
// manifest (GitOps): applying the block is how a proposal is accepted (docs/schemas.md).
import { stringify } from 'yaml';
import type { JsonSchema } from '../../api/schemas.ts';
import type { SchemaSpec } from '../../api/v1alpha1/index.ts';
import { inferFromSamples } from './infer.ts';
import type { StoredSamples } from './samples.ts';

export interface SchemaProposal {
  learning: boolean;
  samples: { requests: number; responses: number };
  input: JsonSchema | null;
  output: JsonSchema | null;
  /** YAML of the `schema:` block of the trigger's spec, jsonSchema filled in. */
  manifest: string;
}

/** Either side: the input's `source` and the output's `asset` are the only differences. */
type IoSchema = NonNullable<SchemaSpec['input']> & NonNullable<SchemaSpec['output']>;

function parsed(texts: readonly string[]): unknown[] {
  const values: unknown[] = [];
  for (const text of texts) {
    try {
      values.push(JSON.parse(text));
    } catch {
      // A store only holds JSON.stringify output; anything else is skipped, not fatal.
    }
  }
  return values;
}

function hasSchema(io: IoSchema | undefined): boolean {
  const text = (value: string | undefined) => value !== undefined && value.trim() !== '';
  return !!io && (text(io.jsonSchema) || text(io.example) || (io.fields?.length ?? 0) > 0);
}

/** One side of the block: the proposal as jsonSchema (source / asset kept), else as configured. */
function side(
  io: SchemaSpec['input'] | SchemaSpec['output'],
  proposed: JsonSchema | null,
): IoSchema {
  if (proposed === null) return io ?? {};
  const kept: IoSchema = {};
  if (io && 'source' in io && io.source !== undefined) kept.source = io.source;
  if (io && 'asset' in io && io.asset !== undefined) kept.asset = io.asset;
  kept.jsonSchema = JSON.stringify(proposed, null, 2);
  return kept;
}

export function proposeSchema(
  schema: SchemaSpec | undefined,
  samples: StoredSamples,
): SchemaProposal {
  // Oldest first: the order in which keys were first seen follows the traffic.
  const input = inferFromSamples(parsed(samples.requests).reverse());
  const output = inferFromSamples(parsed(samples.responses).reverse());
  const inputSide = side(schema?.input, input);
  const outputSide = side(schema?.output, output);
  // Accepting the block ends learning once both sides have a schema; until then it
  // keeps learning (automatic IO without a schema needs learning on).
  const complete = hasSchema(inputSide) && hasSchema(outputSide);
  const block: Record<string, unknown> = {
    mode: 'automatic',
    input: inputSide,
    output: outputSide,
    learning: complete
      ? { enabled: false }
      : {
          enabled: true,
          ...(schema?.learning?.maxSamples ? { maxSamples: schema.learning.maxSamples } : {}),
        },
  };
  return {
    learning: schema?.mode === 'automatic' && schema.learning?.enabled === true,
    samples: { requests: samples.requests.length, responses: samples.responses.length },
    input,
    output,
    manifest: stringify({ schema: block }, { lineWidth: 0 }),
  };
}
