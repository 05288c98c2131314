// Malformed WebhookTrigger and Workflow manifests: a valid base (every example in
// examples/ plus one trigger that uses every optional block) with one to three
// mutations, each tagged so the suite can count what it sent and what was refused.
//
// A mutation picks its target by index into the paths of the manifest as it is at
// that point (so shrinking stays meaningful) and its variant by index into a list of
// bad values. Some mutations leave a manifest valid (deleting an optional field, a
// value that happens to fit): the suite then checks the manifest is reconciled.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { parseAllDocuments } from 'yaml';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type HookgateKind = 'Workflow' | 'WebhookTrigger';

export interface Base {
  kind: HookgateKind;
  manifest: Record<string, Json>;
}

export interface Malformed {
  /** The kind of the base: the resource the manifest is sent to. */
  kind: HookgateKind;
  /** What was done to the base, one tag per mutation (e.g. `huge-string`). */
  tags: string[];
  /** The manifest; not always an object. */
  body: Json;
}

const EXAMPLES = join(import.meta.dirname, '..', '..', 'examples');

/** Valid objects from examples/ (Workflows, WebhookTriggers and Secrets). */
export function exampleObjects(): Record<string, Json>[] {
  const out: Record<string, Json>[] = [];
  for (const file of readdirSync(EXAMPLES)
    .filter((f) => f.endsWith('.yaml'))
    .sort()) {
    for (const doc of parseAllDocuments(readFileSync(join(EXAMPLES, file), 'utf8'))) {
      const value = doc.toJS() as Record<string, Json> | null;
      if (value) out.push(value);
    }
  }
  return out;
}

/** A trigger with every optional block, valid, for the mutations to work on. */
const FULL_TRIGGER: Record<string, Json> = {
  apiVersion: 'hookgate.dev/v1alpha1',
  kind: 'WebhookTrigger',
  metadata: { name: 'full', labels: { team: 'orders' } },
  spec: {
    workflowRef: { name: 'orders' },
    pathSegment: 'orders/:orderId/items',
    methods: ['POST', 'PUT'],
    timeout: '45s',
    requireHttps: false,
    rateLimit: { requestsPerMinute: 600, failureMode: 'open' },
    cors: {
      enabled: true,
      allowedOrigins: ['https://app.example.com'],
      allowCredentials: true,
      allowedHeaders: ['X-Trace'],
      exposedHeaders: ['X-Correlation-ID'],
      maxAgeSeconds: 600,
    },
    maxBodyBytes: 65536,
    inputLimits: { maxDepth: 16, maxKeys: 1000, maxStringBytes: 4096 },
    schema: {
      mode: 'manual',
      input: {
        fields: [
          { name: 'orderId', type: 'string', required: true, description: 'The order.' },
          { name: 'total', type: 'number', required: false },
        ],
      },
    },
    response: {
      mode: 'waitForCompletion',
      statusCode: 200,
      contentType: 'application/json',
      headers: {
        correlationId: true,
        requestId: true,
        timestamp: false,
        custom: [{ name: 'X-Shop', value: 'orders' }],
      },
    },
    deploy: true,
  },
};

/** A workflow with every node type, valid. */
const FULL_WORKFLOW: Record<string, Json> = {
  apiVersion: 'hookgate.dev/v1alpha1',
  kind: 'Workflow',
  metadata: { name: 'full' },
  spec: {
    application: 'shop',
    environment: 'staging',
    publish: true,
    nodes: [
      { id: 'shape', type: 'transform', expression: '{ "id": body.orderId }' },
      {
        id: 'call',
        type: 'http',
        request: { method: 'POST', url: 'https://api.example.com/orders', timeout: '5s' },
        onError: { action: 'retry', maxRetries: 2, backoff: '100ms' },
      },
      { id: 'pause', type: 'delay', duration: '10ms' },
      { id: 'big', type: 'if', condition: 'id = "x"', then: 'route', else: 'reply' },
      {
        id: 'route',
        type: 'switch',
        cases: [{ condition: 'id = "y"', next: 'reply' }],
        default: 'stop',
      },
      { id: 'reply', type: 'respond', statusCode: 201, headers: { 'X-Done': 'yes' } },
      { id: 'stop', type: 'fail', expression: '"no"', statusCode: 409 },
    ],
  },
};

export function bases(): Base[] {
  const out: Base[] = [];
  for (const obj of [...exampleObjects(), FULL_TRIGGER, FULL_WORKFLOW]) {
    if (obj.kind !== 'Workflow' && obj.kind !== 'WebhookTrigger') continue;
    const { namespace: _ns, ...metadata } = obj.metadata as Record<string, Json>;
    out.push({ kind: obj.kind, manifest: { ...obj, metadata } });
  }
  return out;
}

type Path = (string | number)[];

/**
 * Paths in `value` (not the root), depth first: down to 12 levels and the first 20
 * items of a list, so that an earlier mutation's deep nesting or huge list does not
 * make the next one walk it all.
 */
function pathsOf(value: Json, prefix: Path = []): Path[] {
  if (prefix.length >= 12) return [];
  const out: Path[] = [];
  if (Array.isArray(value)) {
    value.slice(0, 20).forEach((v, i) => {
      out.push([...prefix, i], ...pathsOf(v, [...prefix, i]));
    });
  } else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      out.push([...prefix, k], ...pathsOf(v, [...prefix, k]));
    }
  }
  return out;
}

function getAt(root: Json, path: Path): Json | undefined {
  let cur: Json | undefined = root;
  for (const p of path) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string, Json>)[p as string];
  }
  return cur;
}

/** Set (or with `undefined`, delete) the value at `path`; own properties only. */
function setAt(root: Json, path: Path, value: Json | undefined): void {
  const parent = getAt(root, path.slice(0, -1));
  const last = path.at(-1);
  if (parent === null || typeof parent !== 'object' || last === undefined) return;
  if (value === undefined) {
    if (Array.isArray(parent)) parent.splice(last as number, 1);
    else delete (parent as Record<string, Json>)[last as string];
    return;
  }
  // defineProperty: a key such as `__proto__` becomes data, as JSON.parse makes it.
  Object.defineProperty(parent, last, {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}

/** A copy through JSON: safe for deep values (structuredClone recurses on the stack). */
export function jsonClone<T extends Json>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

function pick<T>(list: readonly T[], index: number): T {
  return list[index % list.length] as T;
}

function nested(depth: number, array: boolean): Json {
  let v: Json = 'bottom';
  for (let i = 0; i < depth; i++) v = array ? [v] : { a: v };
  return v;
}

const typeOf = (v: Json | undefined) =>
  v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v;

const WRONG_TYPES: Json[] = [
  42,
  -1,
  3.5,
  1e308,
  true,
  false,
  null,
  'text',
  '',
  [],
  {},
  [1, 'a'],
  { a: 1 },
];
const HUGE_LENGTHS = [64, 129, 254, 513, 1025, 2049, 4097, 16385, 65537, 100_000];
const HUGE_COUNTS = [8, 17, 65, 257, 1000];
const BAD_ENUMS = [
  'PRODUCTION',
  'prod',
  'FETCH',
  'post',
  ' POST',
  'sometimes',
  'none ',
  'Apikey',
  '\u0000',
  'ünïcode',
  'x'.repeat(300),
];
const BAD_PATHS = [
  '',
  '/',
  '//',
  '/ingest',
  'ingest/',
  'a//b',
  '..',
  '.',
  '../admin',
  'a/../b',
  ':',
  ':1x',
  'a b',
  'a%2fb',
  'a?b',
  'a#b',
  '~',
  '*',
  'x'.repeat(64),
  'a/b/c/d/e/f/g/h/i',
  'ünïcode',
  ':id/:id',
  'orders/:id/:id',
  '-lead',
  'webhook/../../api',
  '\u0000',
  'a\nb',
  ':a-b',
];
const BAD_DURATIONS = [
  '30',
  '5 m',
  '-1s',
  '1y',
  '',
  '1h1m',
  '2h',
  '0s',
  '999999999h',
  '1.5s',
  'PT30S',
  'NaN',
  '1e3s',
  '1d',
  '100000000ms',
  's',
  '01s',
  '1H',
];
const BAD_API_VERSIONS: (Json | undefined)[] = [
  'hookgate.dev/v1',
  'hookgate.dev/v1beta1',
  'v1',
  '',
  undefined,
  42,
  'hookgate.dev/v1alpha1 ',
  'HOOKGATE.DEV/v1alpha1',
  'apps/v1',
];
const BAD_KINDS: (Json | undefined)[] = [
  'webhooktrigger',
  'workflow',
  'Secret',
  '',
  undefined,
  7,
  'Workflows',
  'WebhookTriggers',
];
const BAD_NAMES: (Json | undefined)[] = [
  '',
  'UPPER',
  'a_b',
  'x'.repeat(254),
  '-a',
  'a-',
  'a..b',
  '.a',
  42,
  null,
  undefined,
  'a b',
  'ä',
  'x'.repeat(64),
  'a.b.c',
];
const BAD_ROOTS: Json[] = [[], 'WebhookTrigger', 42, true, [{ kind: 'Workflow' }]];
const UNKNOWN_KEYS = [
  'extra',
  'Spec',
  'metadata2',
  '__proto__',
  'constructor',
  'prototype',
  '$ref',
  'x-kubernetes-preserve-unknown-fields',
  'spec.extra',
  '',
];
const DEPTHS = [33, 100, 500, 1000];

/** Combinations the schema alone allows and the CEL rules refuse, per kind. */
const CEL_COMBOS: Record<HookgateKind, [Path, Json | undefined][][]> = {
  WebhookTrigger: [
    [[['spec', 'auth'], { method: 'apiKey' }]],
    [[['spec', 'auth'], { method: 'bearer' }]],
    [[['spec', 'auth'], { method: 'oauth2' }]],
    [
      [
        ['spec', 'auth'],
        {
          method: 'bearer',
          bearer: {
            issuer: 'https://i.example',
            audiences: ['a'],
            jwksUrl: 'https://i.example/jwks',
            keySecretRef: { name: 'k', key: 'pem' },
          },
        },
      ],
    ],
    [
      [
        ['spec', 'auth'],
        {
          method: 'bearer',
          bearer: {
            issuer: 'https://i.example',
            audiences: ['a'],
            keySecretRef: { name: 'k', key: 'pem' },
            algorithms: ['RS256', 'ES256'],
          },
        },
      ],
    ],
    [
      [
        ['spec', 'auth'],
        {
          method: 'oauth2',
          oauth2: {
            issuer: 'https://i.example',
            jwksUrl: 'https://i.example/jwks',
            introspection: {
              url: 'https://i.example/introspect',
              clientId: 'c',
              clientSecretRef: { name: 's', key: 'k' },
            },
          },
        },
      ],
    ],
    [[['spec', 'cors'], { enabled: true, allowedOrigins: [] }]],
    [[['spec', 'cors'], { enabled: true, allowedOrigins: ['*'], allowCredentials: true }]],
    [[['spec', 'schema'], { mode: 'automatic' }]],
    [[['spec', 'schema'], { mode: 'automatic', input: { jsonSchema: '{' } }]],
    [[['spec', 'testCredentials'], { type: 'oauth2', secretRef: { name: 's', key: 'k' } }]],
    [[['spec', 'response'], { mode: 'sseStream', statusCode: 201 }]],
    [
      [['spec', 'response'], { mode: 'sseStream' }],
      [
        ['spec', 'methods'],
        ['GET', 'HEAD'],
      ],
    ],
    [
      [
        ['spec', 'response'],
        { mode: 'immediateAck', headers: { custom: [{ name: 'Content-Length', value: '1' }] } },
      ],
    ],
    [
      [
        ['spec', 'response'],
        {
          mode: 'immediateAck',
          headers: { custom: [{ name: 'Access-Control-Allow-Origin', value: '*' }] },
        },
      ],
    ],
    [[['spec', 'response'], { mode: 'asyncCallback', statusCode: 99 }]],
    [
      [
        ['spec', 'methods'],
        ['POST', 'POST'],
      ],
    ],
    [[['spec', 'methods'], []]],
    [[['spec', 'timeout'], '61m']],
  ],
  Workflow: [
    [[['spec', 'nodes'], [{ id: 'a', type: 'transform' }]]],
    [[['spec', 'nodes'], [{ id: 'a', type: 'http' }]]],
    [[['spec', 'nodes'], [{ id: 'a', type: 'delay' }]]],
    [[['spec', 'nodes'], [{ id: 'a', type: 'if' }]]],
    [[['spec', 'nodes'], [{ id: 'a', type: 'switch' }]]],
    [[['spec', 'nodes'], [{ id: 'a', type: 'fail' }]]],
    [[['spec', 'nodes'], [{ id: 'a', type: 'transform', expression: '$', next: 'missing' }]]],
    [
      [
        ['spec', 'nodes'],
        [
          { id: 'a', type: 'transform', expression: '$' },
          { id: 'a', type: 'respond' },
        ],
      ],
    ],
    [[['spec', 'nodes'], [{ id: 'a', type: 'transform', expression: '$', next: 'a' }]]],
    [[['spec', 'nodes'], [{ id: 'a', type: 'transform', expression: '(((' }]]],
    [[['spec', 'nodes'], []]],
    [
      [
        ['spec', 'nodes'],
        [{ id: 'a', type: 'http', request: { url: 'http://169.254.169.254/latest' } }],
      ],
    ],
    [[['spec', 'nodes'], [{ id: 'a', type: 'delay', duration: '25h' }]]],
  ],
};

interface Mutation {
  op: string;
  target: number;
  variant: number;
}

/** What a mutation works on: the manifest, its paths and the draw. */
interface Target {
  kind: HookgateKind;
  body: Json;
  m: Mutation;
  paths: Path[];
  specPaths: Path[];
  /** The drawn element of `list`, undefined when it is empty. */
  at(list: Path[]): Path | undefined;
}

const isString = (t: Target) => (p: Path) => typeof getAt(t.body, p) === 'string';

/** Each mutation changes `t.body` in place, or returns a new manifest. */
const MUTATORS: Record<string, (t: Target) => Json | void> = {
  'wrong-type': (t) => {
    const path = t.at(t.specPaths);
    if (!path) return;
    const was = typeOf(getAt(t.body, path));
    const options = WRONG_TYPES.filter((v) => typeOf(v) !== was);
    setAt(t.body, path, structuredClone(pick(options, t.m.variant)));
  },
  'missing-field': (t) => {
    const path = t.at(t.paths.filter((p) => p.length <= 4));
    if (path) setAt(t.body, path, undefined);
  },
  'huge-string': (t) => {
    const path = t.at(t.specPaths.filter(isString(t))) ?? ['spec', 'pathSegment'];
    setAt(t.body, path, 'x'.repeat(pick(HUGE_LENGTHS, t.m.variant)));
  },
  'huge-array': (t) => {
    const path = t.at(t.specPaths.filter((p) => Array.isArray(getAt(t.body, p))));
    if (!path) return;
    // Copies of the first item; of a short string when it is big (an earlier huge
    // string or deep nesting): past the bounds is the point, not megabytes.
    const head = (getAt(t.body, path) as Json[])[0] ?? 'x';
    const first = JSON.stringify(head).length > 1000 ? 'x' : head;
    const n = pick(HUGE_COUNTS, t.m.variant);
    const copies = Array.from({ length: n }, (_, i) =>
      typeof first === 'string' ? `${first}${i}` : jsonClone(first),
    );
    setAt(t.body, path, copies);
  },
  'bad-enum': (t) => {
    const path = t.at(t.specPaths.filter(isString(t)));
    if (path) setAt(t.body, path, pick(BAD_ENUMS, t.m.variant));
  },
  'bad-path': (t) => {
    const field = t.kind === 'WebhookTrigger' ? 'pathSegment' : 'application';
    setAt(t.body, ['spec', field], pick(BAD_PATHS, t.m.variant));
  },
  'bad-duration': (t) => {
    const durations = t.specPaths.filter((p) =>
      ['timeout', 'duration', 'backoff'].includes(String(p.at(-1))),
    );
    const fallback: Path =
      t.kind === 'WebhookTrigger' ? ['spec', 'timeout'] : ['spec', 'nodes', 0, 'duration'];
    setAt(t.body, t.at(durations) ?? fallback, pick(BAD_DURATIONS, t.m.variant));
  },
  'unknown-field': (t) => {
    const path = t.at(t.paths.filter((p) => typeOf(getAt(t.body, p)) === 'object')) ?? [];
    const key = pick(UNKNOWN_KEYS, t.m.variant);
    setAt(t.body, [...path, key], pick(WRONG_TYPES, t.m.target));
  },
  'deep-nesting': (t) => {
    const value = nested(pick(DEPTHS, t.m.variant), t.m.target % 2 === 0);
    const path = t.at(t.specPaths) ?? ['spec'];
    setAt(t.body, t.m.target % 3 === 0 ? [...path.slice(0, -1), 'deep'] : path, value);
  },
  'cel-combo': (t) => {
    for (const [path, value] of pick(CEL_COMBOS[t.kind], t.m.variant))
      setAt(t.body, path, structuredClone(value ?? null));
  },
  'api-version': (t) => setAt(t.body, ['apiVersion'], pick(BAD_API_VERSIONS, t.m.variant)),
  kind: (t) => {
    const kinds = [t.kind === 'Workflow' ? 'WebhookTrigger' : 'Workflow', ...BAD_KINDS];
    setAt(t.body, ['kind'], pick(kinds, t.m.variant));
  },
  metadata: (t) => {
    const changes: [Path, Json | undefined][] = [
      ...BAD_NAMES.map((name): [Path, Json | undefined] => [['metadata', 'name'], name]),
      [['metadata'], undefined],
      [['metadata'], pick(WRONG_TYPES, t.m.target)],
      [['metadata', 'labels'], { 'bad key!': 'v', ok: 'x'.repeat(64) }],
      [['metadata', 'labels'], { 'example.com/': 'v' }],
      [['metadata', 'labels'], { 'Example.com/app': 'v' }],
      [['metadata', 'labels'], { app: '-leading-dash' }],
      [['metadata', 'annotations'], { 'a/b/c': 'x' }],
      [['metadata', 'annotations'], { big: 'x'.repeat(300 * 1024) }],
      [['metadata', 'namespace'], 'Not_A_Namespace'],
    ];
    const [path, value] = pick(changes, t.m.variant);
    setAt(t.body, path, value);
  },
  'root-type': (t) => structuredClone(pick(BAD_ROOTS, t.m.variant)),
};

function apply(kind: HookgateKind, body: Json, m: Mutation): Json {
  const paths = pathsOf(body);
  const target: Target = {
    kind,
    body,
    m,
    paths,
    specPaths: paths.filter((p) => p[0] === 'spec'),
    at: (list) => (list.length > 0 ? pick(list, m.target) : undefined),
  };
  const replaced = MUTATORS[m.op]?.(target);
  return replaced === undefined ? body : replaced;
}

export const MUTATIONS = [
  'wrong-type',
  'missing-field',
  'huge-string',
  'huge-array',
  'bad-enum',
  'bad-path',
  'bad-duration',
  'unknown-field',
  'deep-nesting',
  'cel-combo',
  'api-version',
  'kind',
  'metadata',
  'root-type',
] as const;

/** Mutations that touch metadata.name: the suite does not rename those manifests. */
export const NAMING = new Set(['metadata', 'root-type']);

const mutation: fc.Arbitrary<Mutation> = fc.record({
  // root-type replaces the whole manifest: rarer, it says one thing only.
  op: fc.oneof(
    { weight: 26, arbitrary: fc.constantFrom(...MUTATIONS.filter((m) => m !== 'root-type')) },
    { weight: 1, arbitrary: fc.constant('root-type') },
  ),
  target: fc.nat(10_000),
  variant: fc.nat(10_000),
});

/** One malformed manifest: a base and one to three mutations. */
export function malformedManifest(all: Base[] = bases()): fc.Arbitrary<Malformed> {
  return fc
    .tuple(fc.constantFrom(...all), fc.array(mutation, { minLength: 1, maxLength: 3 }))
    .map(([base, mutations]) => {
      let body: Json = structuredClone(base.manifest);
      for (const m of mutations) body = apply(base.kind, body, m);
      return { kind: base.kind, tags: [...new Set(mutations.map((m) => m.op))], body };
    });
}
