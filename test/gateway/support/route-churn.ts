// Route churn through a gateway, for the heap test (test/gateway/route-lifecycle.test.ts).
// Creates, edits (a new generation) and deletes routes in a real RouteTable over a
// MemoryRecordStore, sending requests that make every kind of per-route state
// (rate-limit count, compiled input and output schemas, JWT key, introspection answers,
// decoded API keys, CORS headers), and prints the heap before, right after and after
// full GCs as one JSON line. Bytecode flushing off: code run only at start-up would
// otherwise be dropped during the run and make the heap look smaller than it is.
//
//   node --expose-gc --no-flush-bytecode test/gateway/support/route-churn.ts [routes=10000] [batch=100]
import { createHash } from 'node:crypto';
import { getHeapSpaceStatistics } from 'node:v8';
import Fastify from 'fastify';
import { SignJWT } from 'jose';
import { MemoryRecordStore } from '../../../api/records/memory-store.ts';
import type { RouteRecord, WorkflowRegistration } from '../../../api/records/records.ts';
import type { WebhookTriggerSpec } from '../../../api/v1alpha1/index.ts';
import { outputValidatorFor } from '../../../runtime/engine/output-validator.ts';
import type { Execution, ExecutionEngine } from '../../../runtime/engine/ports.ts';
import { createGuards } from '../../../runtime/gateway/guards.ts';
import { installProblemHandlers } from '../../../runtime/gateway/problem-handler.ts';
import { RouteTable } from '../../../runtime/gateway/route-table.ts';
import { createAuthenticator } from '../../../runtime/gateway/security/auth/index.ts';
import { OAuth2Verifier } from '../../../runtime/gateway/security/auth/oauth2.ts';
import { EndpointRateLimiter } from '../../../runtime/gateway/security/rate-limit.ts';
import { webhookRoutes } from '../../../runtime/gateway/webhook-routes.ts';
import { makeRoute } from '../../gateway-security/fixtures.ts';

const ROUTES = Number(process.argv[2] ?? 10_000);
const BATCH = Number(process.argv[3] ?? 100);
const WORKFLOW = 'churn_production_flow';
const ORIGIN = 'https://app.example.com';
const ISSUER = 'https://idp.example.com';
const AUDIENCE = 'https://hooks.example.com';
const HMAC_KEY = 'a-shared-secret-of-at-least-32-bytes!!';
const API_KEY = 'churn-key-123456';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');

/** A queued engine's answer, without keeping anything. */
const engine: ExecutionEngine = {
  start: (request) =>
    Promise.resolve({
      id: request.input.metadata.executionId,
      workflowId: request.workflow.workflowId,
      triggerKey: request.input.metadata.triggerKey,
      status: 'queued',
      createdAt: request.input.metadata.timestamp,
      input: request.input,
      log: [],
    } satisfies Execution),
  get: () => Promise.resolve(undefined),
  list: () => Promise.resolve([]),
  page: () => Promise.resolve({ items: [] }),
  subscribe: () => () => {},
};

// Introspection answers without a network: every token is active.
const introspection = new OAuth2Verifier({
  fetch: () =>
    Promise.resolve(
      Response.json({
        active: true,
        iss: ISSUER,
        aud: AUDIENCE,
        sub: 'churn-user',
        scope: 'hooks:write',
        exp: Math.floor(Date.now() / 1000) + 3600,
      }),
    ),
});

const routes = new MemoryRecordStore<RouteRecord>();
const workflows = new MemoryRecordStore<WorkflowRegistration>();
await workflows.put(WORKFLOW, {
  workflowId: WORKFLOW,
  namespace: 'churn',
  name: 'flow',
  generation: 1,
  application: 'churn',
  environment: 'production',
  spec: { nodes: [{ id: 'out', type: 'transform', expression: '1' }] },
} as WorkflowRegistration);
const table = await RouteTable.create(routes, workflows);
const guards = createGuards({
  rateLimiter: new EndpointRateLimiter(),
  authenticator: createAuthenticator({ oauth2: introspection }),
});
const app = Fastify({ logger: false });
installProblemHandlers(app);
await app.register((scope, _opts, done) => {
  webhookRoutes(scope, { table, engine, guards, modes: { outputValidator: outputValidatorFor } });
  done();
});
await app.ready();

type Kind = 'schema' | 'bearer' | 'oauth2' | 'apiKey' | 'none';
const others = ['bearer', 'oauth2', 'apiKey', 'none'] as const;
/** Compiling a schema takes milliseconds: one route in fifty has one. */
const SCHEMA_EVERY = 50;
const kindOf = (n: number): Kind =>
  n % SCHEMA_EVERY === 0 ? 'schema' : (others[n % others.length] as Kind);

function spec(kind: Kind, generation: number): Partial<WebhookTriggerSpec> {
  const common: Partial<WebhookTriggerSpec> = {
    pathSegment: 'x',
    // Each generation a different limit: the count carries over and is rescaled.
    rateLimit: { requestsPerMinute: 100_000 + generation, failureMode: 'open', enforce: true },
    cors: {
      enabled: true,
      allowedOrigins: [ORIGIN],
      allowCredentials: false,
      allowedHeaders: [],
      exposedHeaders: [],
      maxAgeSeconds: 600,
    },
  };
  const token = {
    issuer: ISSUER,
    audiences: [AUDIENCE],
    algorithms: ['HS256' as const],
    clockToleranceSeconds: 30,
  };
  switch (kind) {
    case 'schema':
      return {
        ...common,
        schema: {
          mode: 'manual',
          input: { fields: [{ name: 'n', type: 'number', required: true }] },
          output: { fields: [{ name: 'total', type: 'number', required: false }] },
        },
      };
    case 'bearer':
      return {
        ...common,
        auth: { method: 'bearer', bearer: token },
      };
    case 'oauth2':
      return {
        ...common,
        auth: {
          method: 'oauth2',
          oauth2: {
            ...token,
            requiredScopes: ['hooks:write'],
            introspection: {
              url: 'https://idp.example.com/introspect',
              clientId: 'gateway',
              clientSecretRef: { name: 'idp', key: 'secret' },
              cacheSeconds: 60,
            },
          },
        },
      };
    case 'apiKey':
      return {
        ...common,
        auth: { method: 'apiKey', apiKey: { header: 'X-API-Key', secretRef: { name: 'keys' } } },
      };
    case 'none':
      return common;
  }
}

function record(n: number, generation: number): RouteRecord {
  const kind = kindOf(n);
  const key = `churn/r-${n}`;
  const base = makeRoute(spec(kind, generation), {}, key, generation);
  return {
    ...base,
    name: `r-${n}`,
    workflowId: WORKFLOW,
    path: `/webhook/${WORKFLOW}/r-${n}`,
    credentials: {
      ...(kind === 'bearer' ? { jwtKey: HMAC_KEY } : {}),
      ...(kind === 'oauth2' ? { introspectionClientSecret: 'idp-secret' } : {}),
      ...(kind === 'apiKey'
        ? {
            apiKeys: [
              { consumer: 'churn', sha256: createHash('sha256').update(API_KEY).digest('hex') },
            ],
          }
        : {}),
    },
  };
}

const bearerToken = await new SignJWT({ sub: 'churn-user' })
  .setProtectedHeader({ alg: 'HS256' })
  .setIssuer(ISSUER)
  .setAudience(AUDIENCE)
  .setExpirationTime('2h')
  .sign(new TextEncoder().encode(HMAC_KEY));

let requests = 0;

/** One request that passes every protection of route n; fails the run otherwise. */
async function hit(n: number): Promise<void> {
  const kind = kindOf(n);
  const headers: Record<string, string> = { 'content-type': 'application/json', origin: ORIGIN };
  if (kind === 'bearer') headers.authorization = `Bearer ${bearerToken}`;
  if (kind === 'oauth2') headers.authorization = 'Bearer opaque-churn-token';
  if (kind === 'apiKey') headers['x-api-key'] = API_KEY;
  const res = await app.inject({
    method: 'POST',
    url: `/webhook/${WORKFLOW}/r-${n}`,
    headers,
    payload: '{"n":1}',
  });
  requests++;
  if (
    res.statusCode !== 202 ||
    res.headers['ratelimit-limit'] === undefined ||
    res.headers['access-control-allow-origin'] !== ORIGIN
  ) {
    throw new Error(`route ${n} (${kind}): ${res.statusCode} ${res.body}`);
  }
  if (kind === 'schema') {
    const bad = await app.inject({
      method: 'POST',
      url: `/webhook/${WORKFLOW}/r-${n}`,
      headers,
      payload: '{"n":"one"}',
    });
    requests++;
    if (bad.statusCode !== 422)
      throw new Error(`route ${n}: schema not checked (${bad.statusCode})`);
  }
}

/**
 * Create, hit, edit (generation 2), hit, delete: routes [from, to), a batch at a time.
 * The writes of a batch are not awaited one by one, so the table rebuilds once for them.
 */
async function churn(from: number, to: number): Promise<void> {
  for (let start = from; start < to; start += BATCH) {
    const batch = Array.from({ length: Math.min(BATCH, to - start) }, (_, i) => start + i);
    await Promise.all(batch.map((n) => routes.put(`churn/r-${n}`, record(n, 1))));
    await table.refresh();
    for (const n of batch) await hit(n);
    await Promise.all(batch.map((n) => routes.put(`churn/r-${n}`, record(n, 2))));
    await table.refresh();
    for (const n of batch) await hit(n);
    await Promise.all(batch.map((n) => routes.delete(`churn/r-${n}`)));
    await table.refresh();
    if (table.size !== 0) throw new Error(`${table.size} routes left in the table`);
  }
}

/**
 * The heap in use, plus array buffers, without the spaces of code and its metadata
 * (code_*, *trusted*): JIT output grows as a run warms up, whatever the routes.
 */
function heapInUse(): number {
  let used = process.memoryUsage().arrayBuffers;
  for (const { space_name: name, space_used_size: size } of getHeapSpaceStatistics()) {
    if (!name.startsWith('code_') && !name.includes('trusted')) used += size;
  }
  return used;
}

/** The heap after full GCs, once two readings in a row agree (finalizers run between). */
async function settledHeap(): Promise<number> {
  let last = Infinity;
  for (let i = 0; i < 10; i++) {
    gc?.();
    await new Promise((resolve) => setTimeout(resolve, 20));
    const now = heapInUse();
    if (Math.abs(now - last) < 32 * 1024) return now;
    last = now;
  }
  return last;
}

const MiB = 1024 * 1024;
const round = (bytes: number) => Math.round((bytes / MiB) * 100) / 100;

// Warm-up with other keys: compiled code, Fastify's and ajv's own caches.
await churn(ROUTES, ROUTES + 1_000);
requests = 0;
const start = await settledHeap();
const began = performance.now();
await churn(0, ROUTES);
const ms = Math.round(performance.now() - began);
const afterChurn = heapInUse();
const afterGc = await settledHeap();
await app.close();
table.close();
console.log(
  JSON.stringify({
    routes: ROUTES,
    requests,
    ms,
    startMiB: round(start),
    afterChurnMiB: round(afterChurn),
    afterGcMiB: round(afterGc),
    retainedMiB: round(afterGc - start),
  }),
);
