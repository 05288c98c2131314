// The gateway's JWKS fetches and token introspection requests go through the outbound
// guard (rule G1): a WebhookTrigger's jwksUrl or introspection URL cannot make the
// gateway reach loopback, cloud metadata or private addresses the cluster policy does
// not open, whether the address is literal or a DNS answer, and a namespace's narrowing
// applies. A refusal is 503 auth-unavailable for the caller (no policy detail) and one
// report (the log line of the serving roles) per route version.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RouteRecord } from '../../api/records/records.ts';
import type { WebhookTriggerSpec } from '../../api/v1alpha1/index.ts';
import { PROBLEM_BASE } from '../../runtime/errors.ts';
import {
  OutboundGuard,
  type LookupFn,
  type OutboundGuardOptions,
} from '../../runtime/engine/outbound/guard.ts';
import { JwtVerifier, authenticateBearer } from '../../runtime/gateway/security/auth/jwt.ts';
import { OAuth2Verifier } from '../../runtime/gateway/security/auth/oauth2.ts';
import type { AuthOutboundRefusal } from '../../runtime/gateway/security/auth/outbound-fetch.ts';
import { startRuntime } from '../support/gateway.ts';
import { secret, trigger, workflow } from '../support/manifests.ts';
import { makeRoute, problemOf } from './fixtures.ts';

const ISSUER = 'https://idp.example.com/';
const AUDIENCE = 'https://hooks.example.com';

let rsa: { publicKey: CryptoKey; privateKey: CryptoKey };
let jwk: JWK;
/** The provider a refused request must never reach: every TCP connection is counted. */
let provider: Server;
let port = 0;
let connections = 0;
let requests = 0;

beforeAll(async () => {
  rsa = await generateKeyPair('RS256', { extractable: true });
  jwk = { ...(await exportJWK(rsa.publicKey)), kid: 'k1', alg: 'RS256' };
  provider = createServer((req, res) => {
    requests++;
    req.resume();
    req.on('end', () => {
      if (req.url === '/moved') {
        res.writeHead(302, { location: '/jwks.json' }).end();
        return;
      }
      res.setHeader('content-type', 'application/json');
      if (req.url === '/huge') res.end(JSON.stringify({ keys: [], pad: 'x'.repeat(2 << 20) }));
      else if (req.url === '/jwks.json') res.end(JSON.stringify({ keys: [jwk] }));
      else
        res.end(
          JSON.stringify({
            active: true,
            iss: ISSUER,
            aud: AUDIENCE,
            sub: 'introspected',
            scope: 'orders:write',
            exp: Math.floor(Date.now() / 1000) + 600,
          }),
        );
    });
  });
  provider.on('connection', () => connections++);
  await new Promise<void>((done) => provider.listen(0, '127.0.0.1', done));
  port = (provider.address() as AddressInfo).port;
});
afterAll(async () => {
  provider.closeAllConnections();
  await new Promise((done) => provider.close(done));
});

const guards: OutboundGuard[] = [];
function guard(options: OutboundGuardOptions = {}): OutboundGuard {
  const made = new OutboundGuard(options);
  guards.push(made);
  return made;
}
afterEach(async () => {
  await Promise.all(guards.splice(0).map((g) => g.close()));
});

/** A resolver stub: every name answers `address`; the names asked are kept. */
function stubLookup(address: string): LookupFn & { asked: string[] } {
  const asked: string[] = [];
  const lookup = ((hostname, _options, callback) => {
    asked.push(hostname);
    callback(null, [{ address, family: address.includes(':') ? 6 : 4 }]);
  }) as LookupFn & { asked: string[] };
  lookup.asked = asked;
  return lookup;
}

const sign = (claims: Record<string, unknown> = {}) =>
  new SignJWT({
    iss: ISSUER,
    aud: AUDIENCE,
    sub: 'user-1',
    scope: 'orders:write',
    exp: Math.floor(Date.now() / 1000) + 300,
    ...claims,
  })
    .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
    .sign(rsa.privateKey);

function jwksRoute(jwksUrl: string, namespace = 'shop'): RouteRecord {
  const route = makeRoute(
    {
      auth: {
        method: 'bearer',
        bearer: {
          issuer: ISSUER,
          audiences: [AUDIENCE],
          algorithms: ['RS256'],
          clockToleranceSeconds: 30,
          jwksUrl,
        },
      },
    },
    {},
    `${namespace}/jwt`,
  );
  return { ...route, namespace };
}

function introspectionRoute(url: string, namespace = 'shop'): RouteRecord {
  const oauth2: NonNullable<NonNullable<WebhookTriggerSpec['auth']>['oauth2']> = {
    issuer: ISSUER,
    audiences: [AUDIENCE],
    algorithms: ['RS256'],
    clockToleranceSeconds: 30,
    requiredScopes: ['orders:write'],
    introspection: {
      url,
      clientId: 'gw',
      clientSecretRef: { name: 'idp', key: 's' },
      cacheSeconds: 60,
    },
  };
  const route = makeRoute(
    { auth: { method: 'oauth2', oauth2 } },
    { introspectionClientSecret: 'secret' },
    `${namespace}/oauth2`,
  );
  return { ...route, namespace };
}

/** Refusals reported, and verifiers that report into them. */
function verifiers(options: OutboundGuardOptions = {}) {
  const reports: AuthOutboundRefusal[] = [];
  const outbound = guard(options);
  const onOutboundRefused = (r: AuthOutboundRefusal) => reports.push(r);
  const jwt = new JwtVerifier({ outbound, onOutboundRefused, jwksTimeoutMs: 2000 });
  const oauth2 = new OAuth2Verifier({ jwt, outbound, onOutboundRefused, timeoutMs: 2000 });
  return {
    reports,
    bearer: async (route: RouteRecord) =>
      authenticateBearer(route, { authorization: `Bearer ${await sign()}` }, jwt),
    introspect: (route: RouteRecord) =>
      oauth2.authenticate(route, { authorization: 'Bearer opaque-token' }),
  };
}

/** 503 auth-unavailable, with nothing of the policy or the address in what the caller sees. */
async function unavailable(fn: () => unknown): Promise<void> {
  const problem = await problemOf(fn);
  expect(problem.code).toBe('HG_ERR_AUTH_UNAVAILABLE');
  expect(problem.status).toBe(503);
  expect(problem.headers['Retry-After']).toBe('5');
  expect(JSON.stringify(problem.toDocument())).not.toMatch(/outbound|polic|127\.|169\.254|10\.0/i);
}

describe.each([
  ['JWKS', 'jwks', (url: string) => jwksRoute(`${url}/jwks.json`)],
  ['introspection', 'introspection', (url: string) => introspectionRoute(`${url}/introspect`)],
] as const)('%s through the outbound guard', (_name, purpose, routeAt) => {
  const send = (v: ReturnType<typeof verifiers>, route: RouteRecord) =>
    purpose === 'jwks' ? v.bearer(route) : v.introspect(route);

  it('loopback, in any spelling and either scheme, is refused with no policy: no connection', async () => {
    const v = verifiers();
    const before = connections;
    for (const base of [
      `http://127.0.0.1:${port}`,
      `https://127.0.0.1:${port}`,
      `https://2130706433:${port}`,
      `https://0x7f000001:${port}`,
      `https://[::ffff:7f00:1]:${port}`,
      // a name: decided on its real DNS answer, at connect time
      `https://localhost:${port}`,
    ]) {
      const route = routeAt(base);
      await unavailable(() => send(v, route));
      await unavailable(() => send(v, route));
    }
    expect(connections - before).toBe(0);
    // One report per route version and reason, whatever the number of requests.
    expect(v.reports).toHaveLength(6);
    expect(v.reports[0]).toMatchObject({
      route: `shop/${purpose === 'jwks' ? 'jwt' : 'oauth2'}`,
      purpose,
    });
    const loopback: unknown = expect.stringMatching(
      /^address 127\.0\.0\.1 is not public \(loopback\)/,
    );
    expect(v.reports.map((r) => r.reason)).toEqual([
      'scheme http: not allowed (allowed: https:)',
      loopback,
      loopback,
      loopback,
      loopback,
      expect.stringMatching(/^localhost resolves to a refused address (127\.0\.0\.1|::1)/),
    ]);
  });

  it('cloud metadata is refused even where the policy opens link-local', async () => {
    const lookup = stubLookup('169.254.169.254');
    const v = verifiers({ allow: ['169.254.0.0/16'], lookup });
    await unavailable(() => send(v, routeAt('https://169.254.169.254')));
    await unavailable(() => send(v, routeAt('http://169.254.169.254')));
    await unavailable(() => send(v, routeAt('https://metadata.google.internal')));
    await unavailable(() => send(v, routeAt('https://[::ffff:a9fe:a9fe]')));
    expect(lookup.asked).toEqual([]);
    expect(v.reports.map((r) => r.reason)).toEqual([
      expect.stringMatching(/169\.254\.169\.254 is a cloud metadata endpoint \(never allowed\)/),
      // plain http: the policy names 169.254/16 itself, so the scheme passes; the address does not
      expect.stringMatching(/cloud metadata endpoint/),
      expect.stringMatching(/metadata service/),
      expect.stringMatching(/cloud metadata endpoint/),
    ]);
  });

  it('a name whose DNS answer is refused is stopped at connect time (rebinding): no connection', async () => {
    const before = connections;
    // Named by the policy (so plain http passes), but a name never opens loopback.
    const loopback = stubLookup('127.0.0.1');
    const v = verifiers({ allow: ['idp.test'], lookup: loopback });
    await unavailable(() => send(v, routeAt(`http://idp.test:${port}`)));
    expect(loopback.asked).toContain('idp.test');
    expect(v.reports[0]?.reason).toMatch(/idp\.test resolves to a refused address 127\.0\.0\.1/);
    // Not named: a private answer is refused too.
    const privateAnswer = stubLookup('10.0.0.5');
    const w = verifiers({ lookup: privateAnswer });
    await unavailable(() => send(w, routeAt('https://idp.example.net')));
    expect(privateAnswer.asked).toContain('idp.example.net');
    expect(w.reports[0]?.reason).toMatch(/resolves to a refused address 10\.0\.0\.5/);
    expect(connections - before).toBe(0);
  });

  it('plain http to a destination the policy does not name is refused before any lookup', async () => {
    const lookup = stubLookup('93.184.215.14');
    const v = verifiers({ lookup });
    await unavailable(() => send(v, routeAt('http://idp.example.net')));
    expect(lookup.asked).toEqual([]);
    expect(v.reports[0]?.reason).toMatch(/scheme http: not allowed/);
  });

  it('allowed by the cluster policy, the provider is reached (the same name too)', async () => {
    const before = requests;
    const v = verifiers({ allow: [`127.0.0.1:${port}`] });
    const ok = await send(v, routeAt(`http://127.0.0.1:${port}`));
    expect(ok.consumer).toBe(purpose === 'jwks' ? 'user-1' : 'introspected');
    // A name the policy names, answering the allowed address.
    const lookup = stubLookup('127.0.0.1');
    const w = verifiers({ allow: ['idp.test', `127.0.0.1:${port}`], lookup });
    expect((await send(w, routeAt(`http://idp.test:${port}`))).consumer).toBeDefined();
    expect(requests - before).toBe(2);
    expect([...v.reports, ...w.reports]).toEqual([]);
  });

  it('a redirect is not followed, and an answer over 1 MiB is not read: both 503', async () => {
    const v = verifiers({ allow: [`127.0.0.1:${port}`] });
    const route = (path: string) =>
      purpose === 'jwks'
        ? jwksRoute(`http://127.0.0.1:${port}${path}`)
        : introspectionRoute(`http://127.0.0.1:${port}${path}`);
    const before = requests;
    await unavailable(() => send(v, route('/moved')));
    expect(requests - before).toBe(1); // not the Location
    await unavailable(() => send(v, route('/huge')));
    expect(v.reports).toEqual([]);
  });

  it("the trigger's namespace narrowing applies", async () => {
    const before = requests;
    const v = verifiers({
      allow: [`127.0.0.1:${port}`],
      namespaces: { shop: { allow: ['idp.example.com'] }, ops: { deny: ['127.0.0.0/8'] } },
    });
    const base = `http://127.0.0.1:${port}`;
    const inNamespace = (ns: string) =>
      purpose === 'jwks'
        ? jwksRoute(`${base}/jwks.json`, ns)
        : introspectionRoute(`${base}/introspect`, ns);
    await unavailable(() => send(v, inNamespace('shop')));
    await unavailable(() => send(v, inNamespace('ops')));
    expect(requests - before).toBe(0);
    expect(v.reports.map((r) => r.reason)).toEqual([
      expect.stringMatching(/not in the outbound policy of namespace shop's allow list/),
      expect.stringMatching(/denied by the outbound policy of namespace ops/),
    ]);
    // A namespace without a narrowing gets the cluster policy.
    expect((await send(v, inNamespace('other'))).consumer).toBeDefined();
    expect(requests - before).toBe(1);
  });
});

describe('introspection with an injected fetch (tests)', () => {
  it('the guard still checks the destination before the fetch is called', async () => {
    let called = 0;
    const fetch = () => {
      called++;
      return Promise.resolve(
        Response.json({ active: true, iss: ISSUER, aud: AUDIENCE, scope: 'orders:write' }),
      );
    };
    const outbound = guard();
    const v = new OAuth2Verifier({ outbound, fetch });
    const route = introspectionRoute('https://169.254.169.254/introspect');
    await unavailable(() => v.authenticate(route, { authorization: 'Bearer t' }));
    expect(called).toBe(0);
    await v.authenticate(introspectionRoute('https://idp.example.net/introspect'), {
      authorization: 'Bearer t',
    });
    expect(called).toBe(1);
  });
});

describe('the serving roles wire the guard and the log (embedded dev role)', () => {
  const docs = (base: string) => [
    secret('idp', { s: 'client-secret' }),
    workflow('orders'),
    trigger('jwt', {
      pathSegment: 'jwt',
      auth: {
        method: 'bearer',
        bearer: { issuer: ISSUER, audiences: [AUDIENCE], jwksUrl: `${base}/jwks.json` },
      },
    }),
    trigger('opaque', {
      pathSegment: 'opaque',
      auth: {
        method: 'oauth2',
        oauth2: {
          issuer: ISSUER,
          audiences: [AUDIENCE],
          introspection: {
            url: `${base}/introspect`,
            clientId: 'gw',
            clientSecretRef: { name: 'idp', key: 's' },
          },
        },
      },
    }),
  ];

  async function runtime(allow: string[]) {
    const lines: Record<string, unknown>[] = [];
    const logger = pino(
      { level: 'warn' },
      { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
    );
    const rt = await startRuntime({ logger, engine: { outbound: { allow } } });
    await rt.apply('auth.yaml', docs(`http://127.0.0.1:${port}`), ['jwt', 'opaque']);
    return { rt, lines };
  }

  const post = async (rt: Awaited<ReturnType<typeof runtime>>['rt'], segment: string) =>
    rt.app.inject({
      method: 'POST',
      url: `/webhook/default_production_orders/${segment}`,
      headers: { authorization: `Bearer ${await sign()}`, 'content-type': 'application/json' },
      payload: '{}',
    });

  it('no allow entry: 503 auth-unavailable problem+json, nothing sent, a warning logged', async () => {
    const { rt, lines } = await runtime([]);
    const before = connections;
    try {
      for (const segment of ['jwt', 'opaque']) {
        const res = await post(rt, segment);
        expect(res.statusCode, res.body).toBe(503);
        expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(res.json()).toMatchObject({ type: `${PROBLEM_BASE}auth-unavailable` });
        expect(res.body).not.toMatch(/outbound|polic|127\.0\.0\.1/i);
      }
      expect(connections - before).toBe(0);
      const refused = lines.filter((l) => l.code === 'HG_ERR_OUTBOUND_REFUSED');
      expect(refused.map((l) => [l.trigger, l.purpose])).toEqual([
        ['default/jwt', 'jwks'],
        ['default/opaque', 'introspection'],
      ]);
      expect(refused[0]?.msg).toBe('JWKS fetch refused by the outbound policy');
      // Plain http to a destination the policy does not name (https only).
      expect(refused[0]?.reason).toBe('scheme http: not allowed (allowed: https:)');
    } finally {
      await rt.stop();
    }
  });

  it('the provider allow-listed (HOOKGATE_OUTBOUND_ALLOW): both authenticate', async () => {
    const { rt, lines } = await runtime([`127.0.0.1:${port}`]);
    try {
      for (const segment of ['jwt', 'opaque']) {
        const res = await post(rt, segment);
        expect(res.statusCode, res.body).toBe(202);
      }
      expect(lines.filter((l) => l.code === 'HG_ERR_OUTBOUND_REFUSED')).toEqual([]);
    } finally {
      await rt.stop();
    }
  });
});
