// WebhookTrigger input and output schemas: manual fields or automatic JSON Schema text.
import { Type, type Static } from '@sinclair/typebox';
import { literals, withRules } from './common.ts';
import { MAX_LENGTH } from './bounds.ts';

export const FIELD_TYPES = ['string', 'number', 'integer', 'boolean', 'object', 'array'] as const;

export const SchemaField = Type.Object(
  {
    name: Type.String({
      minLength: 1,
      maxLength: 128,
      pattern: '^[A-Za-z_][A-Za-z0-9_.-]*$',
      description: 'Field identifier (a top-level property of the JSON body).',
    }),
    description: Type.Optional(
      Type.String({ maxLength: MAX_LENGTH.description, description: 'Human-readable purpose.' }),
    ),
    type: literals(FIELD_TYPES, { description: 'JSON type of the field.' }),
    value: Type.Optional(
      Type.Unknown({
        description: 'Default or example value used for testing.',
        'x-kubernetes-preserve-unknown-fields': true,
      }),
    ),
    required: Type.Boolean({
      default: false,
      description: 'Whether requests must carry the field.',
    }),
  },
  { additionalProperties: false, description: 'One field of the input or output schema.' },
);
export type SchemaField = Static<typeof SchemaField>;

const fieldList = (description: string) =>
  Type.Array(SchemaField, {
    maxItems: 256,
    description,
    'x-kubernetes-list-type': 'map',
    'x-kubernetes-list-map-keys': ['name'],
  });

const ioFields = (what: string) => ({
  fields: Type.Optional(fieldList(`Manually defined ${what} fields.`)),
  jsonSchema: Type.Optional(
    Type.String({
      maxLength: MAX_LENGTH.jsonText,
      description: `Automatic IO: the ${what} JSON Schema as JSON text (inferred from the example when omitted).`,
    }),
  ),
  example: Type.Optional(
    Type.String({
      maxLength: MAX_LENGTH.jsonText,
      description: `Automatic IO: an example ${what} document as JSON text.`,
    }),
  ),
});

export const InputSchema = Type.Object(
  {
    source: Type.Optional(
      Type.String({
        maxLength: 253,
        description:
          'IO source: where the input comes from (a predefined source, custom data source or data model).',
      }),
    ),
    ...ioFields('input'),
  },
  { additionalProperties: false, description: 'The input schema.' },
);

export const OutputSchema = Type.Object(
  {
    asset: Type.Optional(
      Type.String({ maxLength: 253, description: 'IO asset: the output destination or format.' }),
    ),
    ...ioFields('output'),
  },
  { additionalProperties: false, description: 'The output schema.' },
);

/** The most samples a trigger may keep per side while learning (docs/schemas.md). */
export const MAX_LEARNING_SAMPLES = 200;

export const LearningSpec = Type.Object(
  {
    enabled: Type.Boolean({
      default: false,
      description:
        'Automatic IO: record sample request bodies and workflow responses and propose schemas from them (GET /api/triggers/<ns>/<name>/schema-proposal). A side without jsonSchema or example is not validated while learning.',
    }),
    maxSamples: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_LEARNING_SAMPLES,
        default: 50,
        description: 'Samples kept per side (the newest); the bytes kept are bounded too.',
      }),
    ),
  },
  { additionalProperties: false, description: 'Schema learning (automatic IO mode only).' },
);
export type LearningSpec = Static<typeof LearningSpec>;

export const SchemaSpec = withRules(
  Type.Object(
    {
      mode: literals(['manual', 'automatic'] as const, {
        default: 'manual',
        description:
          'manual: fields are defined by hand; automatic: schemas come from JSON Schema text or examples.',
      }),
      input: Type.Optional(InputSchema),
      output: Type.Optional(OutputSchema),
      learning: Type.Optional(LearningSpec),
    },
    { additionalProperties: false, description: 'Input and output schemas of the endpoint.' },
  ),
  [
    {
      rule: "self.mode != 'automatic' || (has(self.input) && has(self.output))",
      message: 'Please provide both input and output schemas for automatic IO mode.',
      reason: 'FieldValueRequired',
    },
    {
      rule: "self.mode == 'automatic' || !has(self.learning) || !self.learning.enabled",
      message: 'Schema learning needs automatic IO mode.',
      reason: 'FieldValueInvalid',
    },
  ],
);
export type SchemaSpec = Static<typeof SchemaSpec>;
