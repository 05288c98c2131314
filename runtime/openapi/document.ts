// OpenAPI 3.1 documents of deployed endpoints: one per WebhookTrigger, and one for the
// whole gateway (every endpoint the reader may see). Built from what the gateway
// serves: the route's path template and methods, its auth (security schemes), its
// input and output schemas (spec.schema, as the gateway compiles them), the status
// codes of its response mode and the catalogued problems it can answer with.
// docs/openapi.md describes the mapping.
import { compileSchemas, type JsonSchema } from '../../api/schemas.ts';
import {
  DEFAULT_STATUS_CODE,
  type WebhookTriggerSpec,
  type SchemaField,
} from '../../api/v1alpha1/index.ts';
import { CATALOGUE, PROBLEM_CONTENT_TYPE, problemType, type ErrorCode } from '../errors.ts';
import { bodyFormatOf, XML_ROOT } from '../gateway/response-body.ts';
import {
  keyedById,
  schemeOf as signatureSchemeOf,
} from '../gateway/security/auth/signature/schemes.ts';
import { callbackBodySchema, callbacksOf } from './callbacks.ts';

/** What a document needs of a deployed route (a RouteRecord has it all). */
export interface OpenApiRoute {
  namespace: string;
  name: string;
  workflowId: string;
  generation: number;
  /** Path template served, e.g. `/webhook/shop_production_orders/ingest/:id`. */
  path: string;
  spec: WebhookTriggerSpec;
}

type Json = Record<string, unknown>;

export interface OpenApiDocument extends Json {
  openapi: '3.1.0';
  info: { title: string; version: string; description?: string };
  paths: Record<string, Json>;
  components: { schemas: Record<string, Json>; securitySchemes?: Record<string, Json> };
}

export const OPENAPI_VERSION = '3.1.0';

/** `:name` segments become `{name}`. */
export function openApiPath(path: string): string {
  return path
    .split('/')
    .map((part) => (part.startsWith(':') ? `{${part.slice(1)}}` : part))
    .join('/');
}

/** The document of one trigger. */
export function triggerDocument(route: OpenApiRoute, baseUrl: string): OpenApiDocument {
  const parts = routeParts(route, '');
  return {
    openapi: OPENAPI_VERSION,
    info: {
      title: `WebhookTrigger ${route.namespace}/${route.name}`,
      version: String(route.generation),
      description:
        `The webhook endpoint of WebhookTrigger ${route.namespace}/${route.name} ` +
        `(workflow ${route.workflowId}, generation ${route.generation}).`,
    },
    servers: [{ url: baseUrl.replace(/\/+$/, '') }],
    paths: { [openApiPath(route.path)]: parts.pathItem },
    components: componentsOf([parts]),
  };
}

/** The document of the gateway: every route given, sorted by path. */
export function gatewayDocument(routes: OpenApiRoute[], baseUrl: string): OpenApiDocument {
  const sorted = [...routes].sort((a, b) => a.path.localeCompare(b.path));
  const all = sorted.map((route) => ({ route, parts: routeParts(route, prefixOf(route)) }));
  const paths: Record<string, Json> = {};
  for (const { route, parts } of all) paths[openApiPath(route.path)] = parts.pathItem;
  return {
    openapi: OPENAPI_VERSION,
    info: {
      title: 'hookgate gateway',
      version: '1',
      description: `The ${routes.length} webhook endpoint(s) this gateway serves.`,
    },
    servers: [{ url: baseUrl.replace(/\/+$/, '') }],
    paths,
    components: componentsOf(all.map((a) => a.parts)),
  };
}

/** Component names of one trigger in the gateway document: `<namespace>.<name>.`. */
function prefixOf(route: OpenApiRoute): string {
  return `${route.namespace}.${route.name}.`;
}

interface RouteParts {
  pathItem: Json;
  schemas: Record<string, Json>;
  securitySchemes: Record<string, Json>;
}

function componentsOf(parts: RouteParts[]): OpenApiDocument['components'] {
  const schemas: Record<string, Json> = { Problem: problemSchema() };
  const securitySchemes: Record<string, Json> = {};
  for (const p of parts) {
    Object.assign(schemas, p.schemas);
    Object.assign(securitySchemes, p.securitySchemes);
  }
  return {
    schemas,
    ...(Object.keys(securitySchemes).length > 0 ? { securitySchemes } : {}),
  };
}

/** RFC 9457 problem details, as every error of the gateway is answered. */
export function problemSchema(): Json {
  return {
    type: 'object',
    description: 'RFC 9457 problem details (application/problem+json); docs/errors.md lists them.',
    required: ['type', 'title', 'status', 'code'],
    properties: {
      type: { type: 'string', format: 'uri', description: 'The problem type URI.' },
      title: { type: 'string' },
      status: { type: 'integer', minimum: 400, maximum: 599 },
      detail: { type: 'string' },
      instance: { type: 'string', description: 'The request path.' },
      code: {
        type: 'string',
        enum: Object.keys(CATALOGUE),
        description: 'The stable error code.',
      },
      errors: {
        type: 'array',
        description: 'Field-level problems: a JSON Pointer into the request and what is wrong.',
        items: {
          type: 'object',
          required: ['pointer', 'detail'],
          properties: { pointer: { type: 'string' }, detail: { type: 'string' } },
        },
      },
    },
    additionalProperties: true,
  };
}

// ---- one route ----------------------------------------------------------------------

function routeParts(route: OpenApiRoute, prefix: string): RouteParts {
  const { spec } = route;
  const schemas: Record<string, Json> = {};
  const compiled = compileSchemas(spec.schema);
  const io = 'error' in compiled ? {} : compiled;
  const input = io.input ? asSchema(io.input.schema, route, 'input') : undefined;
  const output = io.output ? asSchema(io.output.schema, route, 'output') : undefined;
  if (input) schemas[`${prefix}Input`] = input;
  if (output) schemas[`${prefix}Output`] = output;
  const mode = spec.response.mode;
  if (['immediateAck', 'asyncCallback', 'ackSubscribe'].includes(mode))
    schemas[`${prefix}Accepted`] = acceptedSchema(mode);
  const { securitySchemes, security } = securityOf(spec, prefix);
  const ref = (name: string) => ({ $ref: `#/components/schemas/${prefix}${name}` });
  if (mode === 'asyncCallback')
    schemas[`${prefix}Callback`] = callbackBodySchema(output ? ref('Output') : undefined);
  const inputExample = exampleOf(spec.schema?.mode, spec.schema?.input);

  const pathParameters = route.path
    .split('/')
    .filter((part) => part.startsWith(':'))
    .map((part) => ({
      name: part.slice(1),
      in: 'path',
      required: true,
      schema: { type: 'string' },
      description: 'A path parameter; the workflow reads it as params.' + part.slice(1) + '.',
    }));

  const pathItem: Json = {
    summary: `${route.namespace}/${route.name}`,
    ...(pathParameters.length > 0 ? { parameters: pathParameters } : {}),
  };
  for (const method of spec.methods) {
    const hasBody = !['GET', 'HEAD', 'DELETE', 'OPTIONS'].includes(method);
    pathItem[method.toLowerCase()] = {
      operationId: operationId(route, method),
      summary: `Start workflow ${route.workflowId} (${mode})`,
      description: modeDescription(route),
      tags: [route.workflowId],
      parameters: parametersOf(spec, method),
      ...(hasBody
        ? {
            requestBody: {
              required: input !== undefined,
              description:
                'The trigger input. JSON and form bodies are parsed; XML and text arrive as strings; ' +
                `other types as base64. At most ${spec.maxBodyBytes} bytes.`,
              content: {
                'application/json': {
                  schema: input ? ref('Input') : {},
                  ...(inputExample !== undefined ? { example: inputExample } : {}),
                },
                'application/x-www-form-urlencoded': { schema: { type: 'object' } },
                '*/*': { schema: {} },
              },
            },
          }
        : {}),
      responses: responsesOf(route, method, {
        ...(output ? { output: ref('Output') } : {}),
        ...(schemas[`${prefix}Accepted`] ? { accepted: ref('Accepted') } : {}),
        hasInputSchema: input !== undefined,
      }),
      ...(mode === 'asyncCallback' ? { callbacks: callbacksOf(ref('Callback')) } : {}),
      ...(security ? { security } : {}),
    };
  }
  return { pathItem, schemas, securitySchemes };
}

function operationId(route: OpenApiRoute, method: string): string {
  return `${method.toLowerCase()}_${route.namespace}_${route.name}`.replace(/[^A-Za-z0-9_]/g, '_');
}

/**
 * A JSON Schema of the trigger as an OpenAPI 3.1 schema object. A schema with its own
 * `$ref`s gets an `$id`, so that `#/...` references resolve inside it, not against
 * the OpenAPI document.
 */
function asSchema(schema: JsonSchema, route: OpenApiRoute, side: string): Json {
  if (typeof schema === 'boolean') return schema ? {} : { not: {} };
  if (!JSON.stringify(schema).includes('"$ref"')) return schema;
  return {
    $id: `urn:hookgate:${route.namespace}:${route.name}:${side}`,
    ...schema,
  };
}

function exampleOf(
  mode: 'manual' | 'automatic' | undefined,
  io: { fields?: SchemaField[]; example?: string } | undefined,
): unknown {
  if (!io) return undefined;
  if (mode === 'automatic' && io.example) {
    try {
      return JSON.parse(io.example) as unknown;
    } catch {
      return undefined;
    }
  }
  const valued = (io.fields ?? []).filter((f) => f.value !== undefined);
  if (valued.length === 0) return undefined;
  return Object.fromEntries(valued.map((f) => [f.name, f.value]));
}

function modeDescription(route: OpenApiRoute): string {
  const { mode, statusCode } = route.spec.response;
  const status = statusCode ?? DEFAULT_STATUS_CODE[mode];
  const timeout = route.spec.timeout;
  switch (mode) {
    case 'immediateAck':
      return `Answered ${status} at once with the execution id and its links; the workflow runs after.`;
    case 'asyncCallback':
      return (
        `Answered ${status} at once; the result is POSTed (signed, Standard Webhooks) to the ` +
        'callback URL sent in the X-Callback-URL header or the callbackUrl query parameter.'
      );
    case 'ackSubscribe':
      return `Answered ${status} at once with an SSE channel (channel.url) of the execution's progress events.`;
    case 'waitForCompletion':
      return `Answered ${status} with the workflow's output when it finishes, or 408 after ${timeout} (it keeps running).`;
    case 'sseStream':
      return `Answered 200 with a text/event-stream of progress events until the result, at most ${timeout}.`;
    case 'waitForResponseNode':
      return `Answered by the workflow's first respond node (its status, headers and body), or 408 after ${timeout}.`;
  }
}

function parametersOf(spec: WebhookTriggerSpec, method: string): Json[] {
  const parameters: Json[] = [];
  // Every method that starts an execution honours the key (OPTIONS is answered by the
  // gateway itself where it is not a trigger method).
  if (method !== 'OPTIONS') {
    const idHeader = deliveryIdHeader(spec);
    parameters.push({
      name: 'Idempotency-Key',
      in: 'header',
      required: false,
      schema: { type: 'string', maxLength: 255 },
      description:
        'Repeat a request safely: a repeat with the same key and request gets the first answer.' +
        (idHeader !== undefined
          ? ` Without one, a signed delivery's id (${idHeader}) is its key.`
          : ''),
    });
  }
  if (spec.response.mode === 'asyncCallback') {
    parameters.push(
      {
        name: 'X-Callback-URL',
        in: 'header',
        required: false,
        schema: { type: 'string', format: 'uri' },
        description: 'Where the result is POSTed (this or the callbackUrl query parameter).',
      },
      {
        name: 'callbackUrl',
        in: 'query',
        required: false,
        schema: { type: 'string', format: 'uri' },
        description: 'Where the result is POSTed (this or the X-Callback-URL header).',
      },
    );
  }
  return parameters;
}

// ---- security -----------------------------------------------------------------------

type Auth = NonNullable<WebhookTriggerSpec['auth']>;

function securityOf(
  spec: WebhookTriggerSpec,
  prefix: string,
): { securitySchemes: Record<string, Json>; security?: Json[] } {
  const auth = spec.auth;
  if (!auth || auth.method === 'none') return { securitySchemes: {} };
  const name = `${prefix}${auth.method}`;
  const scheme = schemeOf(auth);
  const scopes = auth.method === 'oauth2' ? (auth.oauth2?.requiredScopes ?? []) : [];
  return { securitySchemes: { [name]: scheme }, security: [{ [name]: scopes }] };
}

function schemeOf(auth: Auth): Json {
  if (auth.method === 'apiKey') {
    return {
      type: 'apiKey',
      in: 'header',
      name: auth.apiKey?.header ?? 'X-API-Key',
      description: 'An API key issued to a consumer (the keys of the Secret are consumer ids).',
    };
  }
  if (auth.method === 'bearer') {
    const b = auth.bearer;
    return {
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'JWT',
      description:
        `A JWT issued by ${b?.issuer ?? 'the issuer'} for ${(b?.audiences ?? []).join(', ')}, ` +
        `signed with ${(b?.algorithms ?? []).join(', ')}.`,
    };
  }
  if (auth.method === 'signature') return signatureScheme(auth.signature);
  return oauth2Scheme(auth.oauth2);
}

/**
 * A signed delivery: OpenAPI has no HMAC scheme, so it is an apiKey in the signature
 * header, with the scheme (preset, algorithm, signed bytes, timestamp) described.
 */
function signatureScheme(signature: Auth['signature']): Json {
  if (!signature) return { type: 'apiKey', in: 'header', name: 'X-Signature' };
  const s = signatureSchemeOf(signature);
  const signed = s.payload
    .map((part) => (typeof part === 'string' ? `{${part}}` : part.literal.toString('utf8')))
    .join('');
  const extras = [
    s.timestampHeader ? `the Unix time in ${s.timestampHeader}` : '',
    s.idHeader ? `the delivery id in ${s.idHeader}` : '',
  ].filter(Boolean);
  return {
    type: 'apiKey',
    in: 'header',
    name: s.header,
    description:
      `Not a key: an HMAC-${s.algorithm.toUpperCase()} signature (${s.encoding}) of ${signed} ` +
      `made with the shared signing secret (preset ${signature.preset})` +
      (extras.length > 0 ? `, sent with ${extras.join(' and ')}` : '') +
      (s.timestamped
        ? `; the signed time must be within ${signature.toleranceSeconds} s of the gateway's clock`
        : '') +
      (signature.rejectReplays ? '; a delivery is accepted once' : '') +
      '. docs/signatures/.',
  };
}

function oauth2Scheme(o: Auth['oauth2']): Json {
  const scopes = o?.requiredScopes ?? [];
  const issuer = o?.issuer ?? '';
  return {
    type: 'oauth2',
    description:
      `An OAuth 2.0 access token from ${issuer} for ${(o?.audiences ?? []).join(', ')}` +
      (scopes.length > 0 ? `, carrying every scope listed (${scopes.join(' ')}).` : '.') +
      ' The token URL is the issuer’s: see its authorization server metadata.',
    flows: {
      clientCredentials: {
        tokenUrl: tokenUrlOf(issuer),
        scopes: Object.fromEntries(scopes.map((s) => [s, `Required scope ${s}.`])),
      },
    },
  };
}

/** The issuer as the token URL's stand-in (the spec does not carry the token endpoint). */
function tokenUrlOf(issuer: string): string {
  try {
    return new URL(issuer).href;
  } catch {
    return 'https://invalid.example/';
  }
}

// ---- responses ----------------------------------------------------------------------

function acceptedSchema(mode: string): Json {
  return {
    type: 'object',
    required: ['executionId', 'status', 'links'],
    properties: {
      executionId: { type: 'string' },
      status: { type: 'string', enum: ['queued', 'running', 'succeeded', 'failed'] },
      links: {
        type: 'object',
        required: ['self', 'events'],
        description: 'Capability links to the execution (they carry its token).',
        properties: {
          self: { type: 'string', description: 'The execution (GET).' },
          events: { type: 'string', description: 'Its event stream (SSE).' },
        },
      },
      ...(mode === 'ackSubscribe'
        ? {
            channel: {
              type: 'object',
              required: ['type', 'url'],
              properties: { type: { const: 'sse' }, url: { type: 'string' } },
            },
          }
        : {}),
      ...(mode === 'asyncCallback' ? { callbackUrl: { type: 'string', format: 'uri' } } : {}),
    },
  };
}

interface ResponseSchemas {
  output?: Json;
  accepted?: Json;
  hasInputSchema: boolean;
}

/** What a rate limit can answer: shadow mode (enforce: false) refuses nothing. */
function rateLimitProblems(limit: WebhookTriggerSpec['rateLimit']): ErrorCode[] {
  if (!limit || limit.enforce === false) return [];
  return limit.failureMode === 'closed'
    ? ['HG_ERR_RATE_LIMITED', 'HG_ERR_RATE_LIMIT_UNAVAILABLE']
    : ['HG_ERR_RATE_LIMITED'];
}

/** What a route's authentication can answer. */
function authProblems(config: WebhookTriggerSpec['auth']): ErrorCode[] {
  const auth = config?.method ?? 'none';
  if (auth === 'none') return [];
  if (auth === 'signature')
    return [
      'HG_ERR_SIGNATURE_MISSING',
      'HG_ERR_SIGNATURE_MALFORMED',
      'HG_ERR_SIGNATURE_EXPIRED',
      'HG_ERR_SIGNATURE_MISMATCH',
      'HG_ERR_SIGNATURE_REPLAYED',
      'HG_ERR_STORE_UNAVAILABLE',
    ];
  const codes: ErrorCode[] = ['HG_ERR_CREDENTIALS_MISSING', 'HG_ERR_CREDENTIALS_INVALID'];
  if (auth === 'oauth2') codes.push('HG_ERR_INSUFFICIENT_SCOPE');
  if (auth === 'oauth2' || (auth === 'bearer' && config?.bearer?.jwksUrl))
    codes.push('HG_ERR_AUTH_UNAVAILABLE');
  // Introspection calls are capped per route (ADR 43).
  if (auth === 'oauth2' && config?.oauth2?.introspection) codes.push('HG_ERR_AUTH_OVERLOADED');
  return codes;
}

/**
 * The header of the delivery id that is a signed delivery's key when it is sent without
 * an Idempotency-Key (claims.ts): on schemes whose replay key is the id (keyedById, as
 * verify.ts picks it: GitHub, Shopify, Standard Webhooks, generic with an id), while
 * replays are remembered (`rejectReplays: false` turns the implicit key off too).
 */
function deliveryIdHeader(spec: WebhookTriggerSpec): string | undefined {
  const signature = spec.auth?.method === 'signature' ? spec.auth.signature : undefined;
  if (signature === undefined || signature.rejectReplays === false) return undefined;
  const scheme = signatureSchemeOf(signature);
  return keyedById(scheme) ? scheme.idHeader : undefined;
}

/** The problems a route may answer with, by the route's settings. */
export function problemsOf(spec: WebhookTriggerSpec, method: string): ErrorCode[] {
  const codes: ErrorCode[] = ['HG_ERR_BAD_REQUEST', 'HG_ERR_URI_TOO_LONG'];
  // Every method that starts an execution honours Idempotency-Key (GET and DELETE too).
  if (method !== 'OPTIONS')
    codes.push(
      'HG_ERR_IDEMPOTENCY_KEY_INVALID',
      'HG_ERR_IDEMPOTENCY_KEY_REUSED',
      'HG_ERR_IDEMPOTENCY_IN_PROGRESS',
    );
  const hasBody = !['GET', 'HEAD', 'DELETE', 'OPTIONS'].includes(method);
  if (hasBody)
    codes.push(
      'HG_ERR_BODY_MALFORMED',
      'HG_ERR_BODY_TOO_DEEP',
      'HG_ERR_BODY_TOO_MANY_KEYS',
      'HG_ERR_BODY_STRING_TOO_LONG',
      'HG_ERR_BODY_NUMBER_OUT_OF_RANGE',
      'HG_ERR_BODY_TOO_LARGE',
      'HG_ERR_UNSUPPORTED_MEDIA_TYPE',
    );
  if (spec.requireHttps) codes.push('HG_ERR_HTTPS_REQUIRED');
  codes.push(...authProblems(spec.auth));
  // With CORS off every cross-origin request is refused, so the answer is always possible.
  codes.push('HG_ERR_CORS_ORIGIN_DENIED');
  codes.push(...rateLimitProblems(spec.rateLimit));
  const mode = spec.response.mode;
  if (mode === 'asyncCallback')
    codes.push('HG_ERR_CALLBACK_URL_MISSING', 'HG_ERR_CALLBACK_URL_REFUSED');
  // A waiting caller gets the code its execution failed with (response-modes.ts):
  // ExecutionError.code's values, the output schema's apart (responsesOf); and
  // execution-result-gone when its gateway, back on Redis, found the execution gone.
  if (mode === 'waitForCompletion' || mode === 'waitForResponseNode')
    codes.push(
      'HG_ERR_REQUEST_TIMEOUT',
      'HG_ERR_EXECUTION_FAILED',
      'HG_ERR_OUTBOUND_REFUSED',
      'HG_ERR_TRIGGER_RECREATED',
      'HG_ERR_EXECUTION_RESULT_GONE',
    );
  // The same for a signed delivery without an Idempotency-Key (its id is its implicit
  // key): a 503 its sender retries, never a 410 (a Standard Webhooks sender disables the
  // endpoint on one). Only where deliveries are keyed by their id (not Stripe, Slack,
  // nor with rejectReplays: false).
  if (
    deliveryIdHeader(spec) !== undefined &&
    (mode === 'waitForCompletion' || mode === 'waitForResponseNode')
  )
    codes.push('HG_ERR_EXECUTION_RESULT_UNAVAILABLE');
  // A request sent with an Idempotency-Key whose execution succeeded and was discarded
  // (ADR 0041) before its answer: the key's retry that resumes it, or a waiting caller
  // whose gateway, back on Redis, found it gone (SSE Stream: as its last event). Only
  // with an explicit key: a tombstone needs a key, and a signed delivery keyed by its id
  // gets 202 succeeded instead (addDeliveredResponse). The acknowledging modes answer 202.
  if (method !== 'OPTIONS' && mode !== 'immediateAck' && mode !== 'asyncCallback')
    codes.push('HG_ERR_EXECUTION_DISCARDED');
  // SSE Stream: the process has its cap of open streams (refused before the execution).
  if (mode === 'sseStream' && method !== 'OPTIONS') codes.push('HG_ERR_STREAMS_EXHAUSTED');
  codes.push(
    'HG_ERR_WORKFLOW_NOT_FOUND',
    'HG_ERR_ENGINE_OVERLOADED',
    'HG_ERR_SHUTTING_DOWN',
    'HG_ERR_INTERNAL',
  );
  return codes;
}

function problemResponse(codes: ErrorCode[], extra: string[] = []): Json {
  const lines = codes.map((c) => `- \`${CATALOGUE[c].type}\` (${c}): ${CATALOGUE[c].title}`);
  return {
    description: [...lines, ...extra].join('\n'),
    content: {
      [PROBLEM_CONTENT_TYPE]: {
        schema: {
          allOf: [
            { $ref: '#/components/schemas/Problem' },
            { properties: { type: { enum: codes.map(problemType) } } },
          ],
        },
      },
    },
  };
}

function responsesOf(route: OpenApiRoute, method: string, schemas: ResponseSchemas): Json {
  const responses = successResponses(route, method, schemas);
  const mode = route.spec.response.mode;
  const waits = mode === 'waitForCompletion' || mode === 'waitForResponseNode';
  // One response per status code, listing every problem type it may carry.
  const codes = problemsOf(route.spec, method);
  if (schemas.hasInputSchema) codes.push('HG_ERR_SCHEMA_VALIDATION');
  if (schemas.output && waits) codes.push('HG_ERR_OUTPUT_SCHEMA');
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) {
    const s = CATALOGUE[code].status;
    byStatus.set(s, [...(byStatus.get(s) ?? []), code]);
  }
  const delivered = deliveryIdHeader(route.spec) !== undefined;
  for (const [s, list] of [...byStatus].sort(([a], [b]) => a - b)) {
    if (responses[String(s)] !== undefined) continue;
    const notes: string[] = [];
    if (s === 500 && waits)
      notes.push('A failing workflow may answer another 4xx/5xx status it chose (a fail node).');
    if (list.includes('HG_ERR_EXECUTION_DISCARDED'))
      notes.push(
        '`execution-discarded` answers only a request sent with an Idempotency-Key, whose ' +
          'execution succeeded and was discarded (its Workflow keeps no record of ' +
          'successes) before its answer' +
          (delivered
            ? '; a signed delivery sent without one is answered 202 with status succeeded instead.'
            : '.'),
      );
    if (list.includes('HG_ERR_EXECUTION_RESULT_UNAVAILABLE'))
      notes.push(
        '`execution-result-unavailable` answers only a signed delivery sent without an ' +
          'Idempotency-Key (with one: 410 `execution-result-gone`).',
      );
    responses[String(s)] = problemResponse(list, notes);
  }
  return responses;
}

function successResponses(route: OpenApiRoute, method: string, schemas: ResponseSchemas): Json {
  const responses = modeSuccessResponses(route, method, schemas);
  const mode = route.spec.response.mode;
  if (
    deliveryIdHeader(route.spec) !== undefined &&
    mode !== 'immediateAck' &&
    mode !== 'asyncCallback'
  )
    addDeliveredResponse(responses, mode, method);
  return responses;
}

const DELIVERED_DESCRIPTION =
  'A signed delivery sent without an Idempotency-Key (its id is its key) whose execution ' +
  'succeeded and was discarded (its Workflow keeps no record of successes) before its ' +
  'answer: its execution id with status succeeded (the links answer 404).';

/**
 * The 202 a signed delivery keyed by its id gets, in a mode that waits for its result or
 * its events, when its execution succeeded and was discarded (response-modes.ts
 * acknowledgeDelivered): merged into a 202 the mode already answers (Ack + Subscribe's,
 * a Wait for Completion configured to 202), and into Wait for Response Node's `default`
 * (a respond node may answer 202 too).
 */
function addDeliveredResponse(responses: Json, mode: string, method: string): void {
  const other = (responses['202'] ??
    (mode === 'waitForResponseNode' ? responses.default : undefined)) as Json | undefined;
  const description =
    other === undefined
      ? DELIVERED_DESCRIPTION
      : `${String(other.description)} Or: ${DELIVERED_DESCRIPTION}`;
  const headers = {
    ...(other?.headers as Json | undefined),
    Location: { description: 'The execution’s capability link.', schema: { type: 'string' } },
  };
  if (method === 'HEAD') {
    responses['202'] = { description, headers };
    return;
  }
  const content = { ...(other?.content as Json | undefined) };
  const json = (content['application/json'] as Json | undefined)?.schema as Json | undefined;
  const delivered = deliveredSchema();
  content['application/json'] = { schema: json ? { anyOf: [json, delivered] } : delivered };
  responses['202'] = { description, headers, content };
}

/** The body of acknowledgeDelivered: `{executionId, status: succeeded, links}`. */
function deliveredSchema(): Json {
  const accepted = acceptedSchema('immediateAck');
  return {
    ...accepted,
    properties: {
      ...(accepted.properties as Json),
      status: { const: 'succeeded' },
    },
  };
}

function modeSuccessResponses(route: OpenApiRoute, method: string, schemas: ResponseSchemas): Json {
  const { mode, statusCode, contentType } = route.spec.response;
  const status = statusCode ?? DEFAULT_STATUS_CODE[mode];
  const success = (description: string, content: Json) =>
    status === 204 || method === 'HEAD' ? { description } : { description, content };
  const location = {
    Location: { description: 'The execution’s capability link.', schema: { type: 'string' } },
  };
  switch (mode) {
    case 'immediateAck':
    case 'asyncCallback':
    case 'ackSubscribe':
      return {
        [String(status)]: {
          ...success('Accepted: the execution is queued.', {
            'application/json': { schema: schemas.accepted ?? {} },
          }),
          headers: location,
        },
      };
    case 'waitForCompletion':
      return {
        [String(status)]: success(
          'The workflow’s output, in the configured content type.',
          bodyContent(contentType, schemas.output),
        ),
      };
    case 'waitForResponseNode':
      return {
        [statusCode === 204 ? '204' : 'default']: success(
          'The first respond node’s status, headers and body (in the configured content type).',
          bodyContent(contentType, schemas.output),
        ),
      };
    case 'sseStream':
      return {
        '200': {
          description:
            'Server-sent events: queued, started, node and respond progress, then completed or failed (or timeout).',
          headers: location,
          content: { 'text/event-stream': { schema: { type: 'string' } } },
        },
      };
  }
}

/** The body of a workflow-produced answer, by the format its content type selects. */
function bodyContent(contentType: string, output: Json | undefined): Json {
  switch (bodyFormatOf(contentType)) {
    case 'json':
      return { [contentType]: { schema: output ?? {} } };
    case 'xml':
      return {
        [contentType]: {
          schema: { ...(output ?? {}), xml: { name: XML_ROOT } },
        },
      };
    default:
      return { [contentType]: { schema: { type: 'string' } } };
  }
}
