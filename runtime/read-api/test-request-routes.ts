// Send Test Request: one request through the gateway to a trigger's endpoint, with the
// credentials saved in its testCredentials (a signed endpoint: signed with its first
// active signing secret) and a user-supplied JSON body; the answer comes back as data. (Saving and clearing the credentials is editing the trigger's
// spec.testCredentials, as with any other field: kubectl, GitOps or the manifest file.)
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { OPEN_ACCESS, type AdminAccess } from '../admin/access.ts';
import { HttpProblem } from '../errors.ts';
import { setOwn } from '../own-property.ts';
import { redactHeaders } from '../gateway/live-events.ts';
import type { RouteRecord, RouteStore } from '../../api/records/records.ts';
import { signDelivery } from '../gateway/security/auth/signature/sign.ts';
import { testRequestMark } from '../gateway/security/test-request-mark.ts';

interface TestRequestBody {
  method?: string;
  body?: unknown;
  query?: Record<string, string>;
  params?: Record<string, string>;
  headers?: Record<string, string>;
}

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];

function parseRequest(raw: unknown): TestRequestBody {
  const input = (raw ?? {}) as TestRequestBody;
  const errors: { pointer: string; detail: string }[] = [];
  if (typeof input !== 'object' || Array.isArray(input))
    errors.push({ pointer: '', detail: 'must be an object' });
  if (input.method !== undefined && !METHODS.includes(String(input.method).toUpperCase())) {
    errors.push({ pointer: '/method', detail: `must be one of ${METHODS.join(', ')}` });
  }
  for (const field of ['query', 'params', 'headers'] as const) {
    const v = input[field];
    if (
      v !== undefined &&
      (typeof v !== 'object' || v === null || Object.values(v).some((x) => typeof x !== 'string'))
    ) {
      errors.push({ pointer: `/${field}`, detail: 'must be an object of strings' });
    }
  }
  if (errors.length === 0 && input.headers) input.headers = headerFields(input.headers, errors);
  if (errors.length > 0) {
    throw new HttpProblem('HG_ERR_INVALID_PARAMETER', 'The test request is malformed', {
      extensions: { errors },
    });
  }
  return input;
}

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** What Node's HTTP parser takes in a header value: no CR, LF, NUL or other controls. */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * The headers by their lower-case names, as a network request would arrive: the
 * in-process request takes any string, so `Content-Type` sat beside the default
 * `content-type` and lost to it, and a name or value no client could send was tested.
 */
function headerFields(
  headers: Record<string, string>,
  errors: { pointer: string; detail: string }[],
): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    const pointer = `/headers/${name.replaceAll('~', '~0').replaceAll('/', '~1')}`;
    const key = name.toLowerCase();
    if (!HEADER_NAME.test(name)) errors.push({ pointer, detail: 'is not a header name' });
    else if (!HEADER_VALUE.test(value))
      errors.push({ pointer, detail: 'has a character a header cannot carry (CR, LF, NUL...)' });
    else if (Object.hasOwn(fields, key))
      errors.push({ pointer, detail: 'is given twice (header names ignore case)' });
    else setOwn(fields, key, value);
  }
  return fields;
}

/**
 * The value given for the path parameter `:name`, else `test`. Own properties only: a
 * parameter named `:constructor` or `:toString` is not Object.prototype's function.
 */
function paramOf(input: TestRequestBody, part: string): string {
  const name = part.slice(1);
  return input.params && Object.hasOwn(input.params, name)
    ? (input.params[name] ?? 'test')
    : 'test';
}

const CARRIES_NO_BODY = new Set(['GET', 'HEAD']);

/**
 * The method of a test request: the one asked for, else the endpoint's first, or its
 * first that carries a body when a body is given. A body with GET or HEAD is refused:
 * the gateway would not read it, and dropping it silently tested something else.
 */
function testMethod(input: TestRequestBody, route: RouteRecord): string {
  const refuse = (detail: string) =>
    new HttpProblem('HG_ERR_INVALID_PARAMETER', 'The test request is malformed', {
      extensions: { errors: [{ pointer: '/body', detail }] },
    });
  if (input.method !== undefined) {
    const verb = input.method.toUpperCase();
    if (input.body !== undefined && CARRIES_NO_BODY.has(verb))
      throw refuse(`a ${verb} request carries no body: leave body out, or choose another method`);
    return verb;
  }
  const methods: string[] = route.spec.methods;
  if (input.body === undefined) return methods[0] ?? 'POST';
  const carrier = methods.find((m) => !CARRIES_NO_BODY.has(m));
  if (carrier === undefined)
    throw refuse(`the endpoint serves ${methods.join(', ')}: none of them carries a body`);
  return carrier;
}

/** The auth header of the saved test credentials; refuses when they are missing or mismatched. */
function credentialHeaders(route: RouteRecord): Record<string, string> {
  const saved = route.spec.testCredentials;
  const method = route.spec.auth?.method ?? 'none';
  // Signed endpoints: the request is signed once its body is known (signDelivery).
  if (method === 'none' || method === 'signature') return {};
  const credential = route.credentials.testCredential;
  if (!saved || credential === undefined) {
    throw new HttpProblem(
      'HG_ERR_TEST_CREDENTIALS_MISSING',
      'Save test credentials (spec.testCredentials) before sending a test request',
    );
  }
  if (saved.type !== method) {
    throw new HttpProblem(
      'HG_ERR_TEST_CREDENTIALS_MISSING',
      `The saved test credentials are for ${saved.type}, but the endpoint uses ${method}`,
    );
  }
  return method === 'apiKey'
    ? { [saved.header.toLowerCase()]: credential }
    : { authorization: `Bearer ${credential}` };
}

export interface TestRequestOptions {
  routes: RouteStore;
  /** The webhook app the test request goes through (in-process, never over the network). */
  webhooks: { inject(options: InjectOptions): Promise<LightMyRequestResponse> };
  /** Sending needs `create` on `webhooktriggers/test` in the trigger's namespace. */
  access?: AdminAccess;
}

export function testRequestRoutes(app: FastifyInstance, options: TestRequestOptions): void {
  const access = options.access ?? OPEN_ACCESS;
  app.post('/api/triggers/:namespace/:name/test', async (request) => {
    const { namespace, name } = request.params as { namespace: string; name: string };
    await access.require(request, {
      verb: 'create',
      resource: 'webhooktriggers',
      subresource: 'test',
      namespace,
      name,
    });
    const input = parseRequest(request.body);
    const route = await options.routes.get(`${namespace}/${name}`);
    if (!route) {
      throw new HttpProblem(
        'HG_ERR_ROUTE_NOT_FOUND',
        `WebhookTrigger ${namespace}/${name} is not deployed`,
      );
    }
    const saved = route.spec.testCredentials;
    const headers: Record<string, string> = { ...input.headers, ...credentialHeaders(route) };
    const path = route.path
      .split('/')
      .map((part) => (part.startsWith(':') ? encodeURIComponent(paramOf(input, part)) : part))
      .join('/');
    const query = new URLSearchParams(input.query ?? {}).toString();
    const url = query ? `${path}?${query}` : path;
    const verb = testMethod(input, route);
    const hasBody = input.body !== undefined;
    if (hasBody) headers['content-type'] ??= 'application/json';
    const payload = hasBody ? JSON.stringify(input.body) : undefined;
    if (route.spec.auth?.method === 'signature') {
      Object.assign(headers, signDelivery(route, Buffer.from(payload ?? '', 'utf8')));
    }
    const started = process.hrtime.bigint();
    const res = await options.webhooks.inject({
      method: verb,
      url,
      // In-process: counts as HTTPS for endpoints that require it (test-request-mark.ts).
      headers: { ...headers, ...testRequestMark() },
      ...(payload !== undefined ? { payload } : {}),
    });
    const type = String(res.headers['content-type'] ?? '');
    let body: unknown = res.body;
    if (/json/.test(type) && res.body !== '') {
      try {
        body = JSON.parse(res.body);
      } catch {
        body = res.body;
      }
    }
    return {
      request: { method: verb, url, headers: redactHeaders(headers, saved?.header) },
      response: { statusCode: res.statusCode, headers: res.headers, body },
      durationMs: Number(process.hrtime.bigint() - started) / 1e6,
    };
  });
}
