import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey, type JWTPayload } from 'jose';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { WebhookTriggerSpec } from '../../api/v1alpha1/index.ts';
import {
  authHeaderNameFor,
  createAuthenticator,
} from '../../runtime/gateway/security/auth/index.ts';
import { JwtVerifier } from '../../runtime/gateway/security/auth/jwt.ts';
import { OAuth2Verifier, tokenScopes } from '../../runtime/gateway/security/auth/oauth2.ts';
import { OutboundGuard } from '../../runtime/engine/outbound/guard.ts';
import { makeRoute, problemOf, sha256Hex } from './fixtures.ts';

type OAuth2 = NonNullable<NonNullable<WebhookTriggerSpec['auth']>['oauth2']>;

const ISSUER = 'https://idp.example.com/';
const AUDIENCE = 'https://hooks.example.com';
const T0 = Date.parse('2026-11-23T08:00:00Z');
const T0_S = T0 / 1000;
let clock = T0;

let server: FastifyInstance;
let base = '';
const answers = new Map<string, unknown>();
const hits = new Map<string, number>();
const requests: { authorization?: string; body: Record<string, string> }[] = [];
let mode: 'ok' | 'error' | 'hang' | 'html' | 'slow' | 'reset' | 'throttled' | 'forbidden' = 'ok';
/** Calls being answered right now, and the most at once (the 'slow' mode holds them). */
let inFlight = 0;
let mostInFlight = 0;
let rsa: { publicKey: CryptoKey; privateKey: CryptoKey };
let outbound: OutboundGuard;

beforeAll(async () => {
  rsa = await generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await exportJWK(rsa.publicKey)), kid: 'k1', alg: 'RS256' };
  server = Fastify({ forceCloseConnections: true });
  server.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string' },
    (_req, body, done) => done(null, Object.fromEntries(new URLSearchParams(body as string))),
  );
  server.post('/introspect', (req, reply) => {
    const body = req.body as Record<string, string>;
    requests.push({ authorization: req.headers.authorization, body });
    const token = body.token ?? '';
    hits.set(token, (hits.get(token) ?? 0) + 1);
    if (mode === 'hang') return; // never answers
    if (mode === 'slow') {
      inFlight++;
      mostInFlight = Math.max(mostInFlight, inFlight);
      return new Promise((resolve) => setTimeout(resolve, 150)).then(() => {
        inFlight--;
        return reply.send(answers.get(token) ?? { active: false });
      });
    }
    if (mode === 'error') return reply.status(502).send({ error: 'bad gateway' });
    if (mode === 'reset') return void req.raw.socket.destroy(); // a transport failure
    if (mode === 'throttled') return reply.status(429).send({ error: 'slow_down' });
    if (mode === 'forbidden') return reply.status(401).send({ error: 'invalid_client' });
    if (mode === 'html') return reply.type('text/html').send('<html>maintenance</html>');
    return reply.send(answers.get(token) ?? { active: false });
  });
  server.get('/jwks.json', (_req, reply) => reply.send({ keys: [jwk] }));
  await server.listen({ host: '127.0.0.1', port: 0 });
  const port = (server.server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
  // The provider listens on loopback: the cluster policy must name it (and the closed
  // port 1 of the "down" case), which also lets it be plain http.
  outbound = new OutboundGuard({ allow: [`127.0.0.1:${port}`, '127.0.0.1:1'] });
});
afterAll(async () => {
  await server.close();
  await outbound.close();
});
beforeEach(() => {
  clock = T0;
  mode = 'ok';
});

function introspectionRoute(
  extra: Partial<OAuth2> = {},
  secret: string | null = 's3cr3t:&',
  url?: string,
) {
  return makeRoute(
    {
      auth: {
        method: 'oauth2',
        oauth2: {
          issuer: ISSUER,
          audiences: [AUDIENCE],
          algorithms: ['RS256'],
          clockToleranceSeconds: 30,
          requiredScopes: ['orders:write'],
          introspection: {
            url: url ?? `${base}/introspect`,
            clientId: 'hook gate',
            clientSecretRef: { name: 'idp', key: 'secret' },
            cacheSeconds: 60,
          },
          ...extra,
        },
      },
    },
    secret === null ? {} : { introspectionClientSecret: secret },
    'shop/oauth2',
  );
}

function active(token: string, claims: Record<string, unknown> = {}) {
  answers.set(token, {
    active: true,
    iss: ISSUER,
    aud: AUDIENCE,
    sub: 'user-7',
    scope: 'orders:read orders:write',
    exp: T0_S + 3600,
    ...claims,
  });
}

// A generous timeout: a loaded CI box must not turn a slow answer into a 503. Only the
// "hang" case uses a short one (the endpoint never answers there).
const verifier = (timeoutMs = 10_000) =>
  new OAuth2Verifier({ now: () => clock, timeoutMs, outbound });
type Route = ReturnType<typeof introspectionRoute>;
const call = (v: OAuth2Verifier, route: Route, token: string) =>
  v.authenticate(route, { authorization: `Bearer ${token}` });

describe('scopes', () => {
  it('reads space-separated scope or an scp array', () => {
    expect([...tokenScopes({ scope: ' a  b c ' })]).toEqual(['a', 'b', 'c']);
    expect([...tokenScopes({ scp: ['a', 1, 'b'] })]).toEqual(['a', 'b']);
    expect(tokenScopes({}).size).toBe(0);
  });
});

describe('OAuth 2.0 by introspection (RFC 7662)', () => {
  it('an active token with the scope passes; the call uses Basic client credentials and a form body', async () => {
    active('tok-ok');
    expect(await call(verifier(), introspectionRoute(), 'tok-ok')).toEqual({ consumer: 'user-7' });
    const last = requests.at(-1)!;
    expect(last.body).toEqual({ token: 'tok-ok', token_type_hint: 'access_token' });
    const decoded = Buffer.from(last.authorization!.replace(/^Basic /, ''), 'base64').toString();
    expect(decoded).toBe('hook+gate:s3cr3t%3A%26');
  });

  it('missing scope → 403 insufficient_scope naming the required scope', async () => {
    active('tok-read', { scope: 'orders:read' });
    const problem = await problemOf(() => call(verifier(), introspectionRoute(), 'tok-read'));
    expect(problem.code).toBe('HG_ERR_INSUFFICIENT_SCOPE');
    expect(problem.status).toBe(403);
    expect(problem.headers['WWW-Authenticate']).toBe(
      'Bearer realm="hookgate", error="insufficient_scope", scope="orders:write"',
    );
    expect(problem.extensions.missingScopes).toEqual(['orders:write']);
  });

  it('a scope that only shares a prefix does not count', async () => {
    active('tok-prefix', { scope: 'orders:writer orders' });
    const problem = await problemOf(() => call(verifier(), introspectionRoute(), 'tok-prefix'));
    expect(problem.code).toBe('HG_ERR_INSUFFICIENT_SCOPE');
  });

  it('an inactive token → 401 invalid_token (scope is never looked at)', async () => {
    answers.set('tok-inactive', { active: false, scope: 'orders:write' });
    for (const token of ['tok-inactive', 'tok-unknown']) {
      const problem = await problemOf(() => call(verifier(), introspectionRoute(), token));
      expect(problem.code).toBe('HG_ERR_CREDENTIALS_INVALID');
      expect(problem.headers['WWW-Authenticate']).toBe(
        'Bearer realm="hookgate", error="invalid_token", error_description="The token is not active"',
      );
    }
    // "active": "true" (a string) is not active either
    answers.set('tok-string', { active: 'true', scope: 'orders:write' });
    expect((await problemOf(() => call(verifier(), introspectionRoute(), 'tok-string'))).code).toBe(
      'HG_ERR_CREDENTIALS_INVALID',
    );
  });

  it('active but expired, wrong issuer or wrong audience → 401', async () => {
    active('tok-exp', { exp: T0_S - 31 });
    active('tok-iss', { iss: 'https://evil.example/' });
    active('tok-aud', { aud: ['https://other.example'] });
    // The trigger names its issuer and audiences (the CRD requires them): an answer
    // that names neither cannot show the token is for this endpoint.
    active('tok-no-iss', { iss: undefined });
    active('tok-no-aud', { aud: undefined });
    active('tok-null-aud', { aud: null });
    for (const [token, description] of [
      ['tok-exp', 'The token has expired'],
      ['tok-iss', 'The token issuer is not accepted'],
      ['tok-aud', 'The token audience is not accepted'],
      ['tok-no-iss', 'The token issuer is not accepted'],
      ['tok-no-aud', 'The token audience is not accepted'],
      ['tok-null-aud', 'The token audience is not accepted'],
    ] as const) {
      const problem = await problemOf(() => call(verifier(), introspectionRoute(), token));
      expect(problem.code).toBe('HG_ERR_CREDENTIALS_INVALID');
      expect(problem.headers['WWW-Authenticate']).toContain(`error_description="${description}"`);
    }
  });

  it('no token → 401 with a bare Bearer challenge, nothing sent to the provider', async () => {
    const before = requests.length;
    const problem = await problemOf(() => verifier().authenticate(introspectionRoute(), {}));
    expect(problem.code).toBe('HG_ERR_CREDENTIALS_MISSING');
    expect(problem.headers['WWW-Authenticate']).toBe('Bearer realm="hookgate"');
    expect(requests.length).toBe(before);
  });

  it('introspection down, 5xx, HTML or too slow → 503 auth-unavailable (fail closed)', async () => {
    active('tok-down');
    const down = introspectionRoute({}, 's', 'http://127.0.0.1:1/introspect');
    expect((await problemOf(() => call(verifier(), down, 'tok-down'))).code).toBe(
      'HG_ERR_AUTH_UNAVAILABLE',
    );
    for (const m of ['error', 'html', 'hang'] as const) {
      mode = m;
      const v = verifier(m === 'hang' ? 200 : 10_000);
      const problem = await problemOf(() => call(v, introspectionRoute(), 'tok-down'));
      expect(problem.code).toBe('HG_ERR_AUTH_UNAVAILABLE');
      expect(problem.status).toBe(503);
    }
  });

  it('no client secret configured → 503', async () => {
    active('tok-nosecret');
    const problem = await problemOf(() =>
      call(verifier(), introspectionRoute({}, null), 'tok-nosecret'),
    );
    expect(problem.code).toBe('HG_ERR_AUTH_UNAVAILABLE');
  });

  it('caches an active answer for cacheSeconds', async () => {
    const v = verifier();
    const route = introspectionRoute();
    active('tok-cache');
    await call(v, route, 'tok-cache');
    clock = T0 + 59_000;
    await call(v, route, 'tok-cache');
    expect(hits.get('tok-cache')).toBe(1);
    clock = T0 + 61_000;
    await call(v, route, 'tok-cache');
    expect(hits.get('tok-cache')).toBe(2);
  });

  it('keeps the answers with the route record: a new record of the route asks again', async () => {
    const v = verifier();
    active('tok-record');
    const first = introspectionRoute();
    await call(v, first, 'tok-record');
    await call(v, first, 'tok-record');
    expect(hits.get('tok-record')).toBe(1);
    // The route table makes a new record when the route changes (generation, Secret).
    const next = introspectionRoute();
    await call(v, next, 'tok-record');
    expect(hits.get('tok-record')).toBe(2);
    expect(v.cachedAnswers(first)).toBe(1);
    expect(v.cachedAnswers(next)).toBe(1);
  });

  it('keeps at most maxCacheEntries answers per route, dropping the oldest', async () => {
    const v = new OAuth2Verifier({ now: () => clock, maxCacheEntries: 2, outbound });
    const route = introspectionRoute();
    for (const token of ['tok-max-1', 'tok-max-2', 'tok-max-3']) {
      active(token);
      await call(v, route, token);
    }
    expect(v.cachedAnswers(route)).toBe(2);
    await call(v, route, 'tok-max-3');
    expect(hits.get('tok-max-3')).toBe(1);
    await call(v, route, 'tok-max-1');
    expect(hits.get('tok-max-1')).toBe(2);
  });

  it('never caches beyond the token exp', async () => {
    const v = verifier();
    const route = introspectionRoute();
    active('tok-short', { exp: T0_S + 10 });
    await call(v, route, 'tok-short');
    clock = T0 + 9_000;
    await call(v, route, 'tok-short');
    expect(hits.get('tok-short')).toBe(1);
    // past exp the provider is asked again (and now says inactive)
    clock = T0 + 11_000;
    answers.set('tok-short', { active: false });
    const problem = await problemOf(() => call(v, route, 'tok-short'));
    expect(problem.code).toBe('HG_ERR_CREDENTIALS_INVALID');
    expect(hits.get('tok-short')).toBe(2);
  });

  it('an inactive answer is remembered for negativeCacheMs only; failures are not cached', async () => {
    const v = verifier();
    const route = introspectionRoute();
    answers.set('tok-later', { active: false });
    await expect(call(v, route, 'tok-later')).rejects.toThrow();
    active('tok-later');
    clock = T0 + 9_000; // still refused, without asking
    expect((await problemOf(() => call(v, route, 'tok-later'))).code).toBe(
      'HG_ERR_CREDENTIALS_INVALID',
    );
    expect(hits.get('tok-later')).toBe(1);
    clock = T0 + 10_001;
    expect(await call(v, route, 'tok-later')).toEqual({ consumer: 'user-7' });
    expect(v.cachedAnswers(route)).toBe(1);
    expect(hits.get('tok-later')).toBe(2);
    // A failure is not remembered for the token: once the provider's cooldown is over
    // (below), the token is asked about again.
    active('tok-fail');
    mode = 'error';
    await expect(call(v, route, 'tok-fail')).rejects.toMatchObject({ status: 503 });
    mode = 'ok';
    clock += 5_001;
    expect(await call(v, route, 'tok-fail')).toEqual({ consumer: 'user-7' });
    expect(hits.get('tok-fail')).toBe(2);
  });

  it('the scope check runs on cached answers too', async () => {
    const v = verifier();
    active('tok-scope-cache');
    const stricter = introspectionRoute({ requiredScopes: ['orders:write', 'admin'] });
    await problemOf(() => call(v, stricter, 'tok-scope-cache'));
    const problem = await problemOf(() => call(v, stricter, 'tok-scope-cache'));
    expect(hits.get('tok-scope-cache')).toBe(1);
    expect(problem.code).toBe('HG_ERR_INSUFFICIENT_SCOPE');
    expect(problem.headers['WWW-Authenticate']).toContain('scope="orders:write admin"');
  });
});

describe('introspection calls are bounded (anonymous callers with made-up tokens)', () => {
  const randomToken = () => `rnd-${Math.random().toString(36).slice(2)}-${Date.now()}`;
  beforeEach(() => {
    inFlight = 0;
    mostInFlight = 0;
  });

  it('a burst of random tokens makes at most 8 calls at once; the rest get 503 auth-overloaded', async () => {
    const v = verifier();
    const route = introspectionRoute();
    active('tok-known');
    await call(v, route, 'tok-known'); // a caller seen before: cached
    mode = 'slow';
    const before = requests.length;
    const tokens = Array.from({ length: 40 }, randomToken);
    const flood = tokens.map((t) => problemOf(() => call(v, route, t)));
    // Meanwhile the known caller is answered from the cache, not refused.
    expect(await call(v, route, 'tok-known')).toEqual({ consumer: 'user-7' });
    const problems = await Promise.all(flood);
    expect(requests.length - before).toBe(8);
    expect(mostInFlight).toBe(8);
    const overloaded = problems.filter((p) => p.code === 'HG_ERR_AUTH_OVERLOADED');
    expect(overloaded).toHaveLength(32);
    expect(overloaded[0]!.status).toBe(503);
    expect(overloaded[0]!.headers['Retry-After']).toBe('1');
    expect(problems.filter((p) => p.code === 'HG_ERR_CREDENTIALS_INVALID')).toHaveLength(8);
    // Once the calls are answered, the cap is free again.
    mode = 'ok';
    active('tok-after');
    expect(await call(v, route, 'tok-after')).toEqual({ consumer: 'user-7' });
  });

  it('the cap is per route and configurable', async () => {
    const v = new OAuth2Verifier({ now: () => clock, outbound, maxConcurrentCalls: 2 });
    const one = introspectionRoute();
    const two = introspectionRoute();
    mode = 'slow';
    const before = requests.length;
    const answers = await Promise.all(
      [one, one, one, two, two, two].map((r) => problemOf(() => call(v, r, randomToken()))),
    );
    expect(requests.length - before).toBe(4);
    expect(answers.filter((p) => p.code === 'HG_ERR_AUTH_OVERLOADED')).toHaveLength(2);
  });

  it('one call per token at a time: concurrent requests with the same token share it', async () => {
    const v = verifier();
    const route = introspectionRoute();
    active('tok-shared');
    mode = 'slow';
    const results = await Promise.all(
      Array.from({ length: 20 }, () => call(v, route, 'tok-shared')),
    );
    expect(results).toEqual(Array.from({ length: 20 }, () => ({ consumer: 'user-7' })));
    expect(hits.get('tok-shared')).toBe(1);
    // the same for a token the provider refuses: one call, twenty 401s
    const refused = await Promise.all(
      Array.from({ length: 20 }, () => problemOf(() => call(v, route, 'tok-shared-bad'))),
    );
    expect(new Set(refused.map((p) => p.code))).toEqual(new Set(['HG_ERR_CREDENTIALS_INVALID']));
    expect(hits.get('tok-shared-bad')).toBe(1);
  });

  it('a refused token sent again and again costs one call per negativeCacheMs', async () => {
    const v = verifier();
    const route = introspectionRoute();
    active('tok-wrong-aud', { aud: 'https://other.example' });
    for (let i = 0; i < 20; i++) {
      const problem = await problemOf(() =>
        call(v, route, i % 2 ? 'tok-revoked' : 'tok-wrong-aud'),
      );
      expect(problem.code).toBe('HG_ERR_CREDENTIALS_INVALID');
      // the same answer as the provider's, from the cache too
      expect(problem.headers['WWW-Authenticate']).toContain(
        i % 2 ? 'The token is not active' : 'The token audience is not accepted',
      );
    }
    expect(hits.get('tok-revoked')).toBe(1);
    expect(hits.get('tok-wrong-aud')).toBe(1);
    clock = T0 + 10_001;
    await problemOf(() => call(v, route, 'tok-revoked'));
    expect(hits.get('tok-revoked')).toBe(2);
  });

  it('refused tokens are bounded per route (oldest dropped) and can be turned off', async () => {
    const v = new OAuth2Verifier({ now: () => clock, outbound, maxCacheEntries: 3 });
    const route = introspectionRoute();
    for (let i = 0; i < 10; i++) await problemOf(() => call(v, route, randomToken()));
    expect(v.refusedTokens(route)).toBe(3);
    const off = new OAuth2Verifier({ now: () => clock, outbound, negativeCacheMs: 0 });
    await problemOf(() => call(off, route, 'tok-off'));
    await problemOf(() => call(off, route, 'tok-off'));
    expect(hits.get('tok-off')).toBe(2);
    expect(off.refusedTokens(route)).toBe(0);
  });
});

describe('a provider failure starts a cooldown (no call per request while it is down)', () => {
  const calls = () => requests.length;
  const unavailable = async (v: OAuth2Verifier, route: Route, token: string) => {
    const problem = await problemOf(() => call(v, route, token));
    expect(problem.code).toBe('HG_ERR_AUTH_UNAVAILABLE');
    expect(problem.status).toBe(503);
    expect(problem.headers['Retry-After']).toBe('5');
    return problem;
  };

  it('after a 5xx: 503 for 5 s without a call, then the provider is asked again', async () => {
    const v = verifier();
    const route = introspectionRoute();
    active('tok-cd-cached');
    await call(v, route, 'tok-cd-cached');
    await problemOf(() => call(v, route, 'tok-cd-refused')); // inactive: remembered 10 s
    mode = 'error';
    const before = calls();
    const first = await unavailable(v, route, 'tok-cd-1');
    expect(calls() - before).toBe(1);
    // 20 requests with other tokens within the cooldown: the same 503, no call.
    for (let i = 0; i < 20; i++) {
      clock = T0 + i * 200;
      const again = await unavailable(v, route, `tok-cd-other-${i}`);
      expect(again.message).toBe(first.message);
    }
    expect(calls() - before).toBe(1);
    // What the caches hold is answered as before: a known caller passes, a refused token is 401.
    expect(await call(v, route, 'tok-cd-cached')).toEqual({ consumer: 'user-7' });
    expect((await problemOf(() => call(v, route, 'tok-cd-refused'))).code).toBe(
      'HG_ERR_CREDENTIALS_INVALID',
    );
    expect(calls() - before).toBe(1);
    // Over: the next request calls (the provider is back).
    mode = 'ok';
    active('tok-cd-2');
    clock = T0 + 5_000;
    expect(await call(v, route, 'tok-cd-2')).toEqual({ consumer: 'user-7' });
    expect(calls() - before).toBe(2);
  });

  it('a transport failure (connection reset, timeout) and a 429 start it too; a 401 or HTML answer does not', async () => {
    const route = introspectionRoute();
    for (const m of ['reset', 'hang', 'throttled'] as const) {
      const v = verifier(m === 'hang' ? 200 : 10_000);
      mode = m;
      const before = calls();
      await unavailable(v, route, `tok-${m}-1`);
      await unavailable(v, route, `tok-${m}-2`);
      await unavailable(v, route, `tok-${m}-3`);
      expect(calls() - before, m).toBe(1);
      clock += 5_000;
      await unavailable(v, route, `tok-${m}-4`);
      expect(calls() - before, m).toBe(2);
    }
    // Answers that say nothing of the provider being down: every request asks again.
    for (const m of ['forbidden', 'html'] as const) {
      const v = verifier();
      mode = m;
      const before = calls();
      for (let i = 0; i < 3; i++) await unavailable(v, route, `tok-${m}-${i}`);
      expect(calls() - before, m).toBe(3);
    }
  });

  it('a clock stepped back does not lengthen it: over once its end is further than 5 s away', async () => {
    const v = verifier();
    const route = introspectionRoute();
    mode = 'error';
    const before = calls();
    await unavailable(v, route, 'tok-step-1');
    expect(calls() - before).toBe(1);
    // The wall clock steps back an hour (NTP, a resumed VM): the cooldown's end is an
    // hour and 5 s away. The provider is back; the next token is asked about.
    mode = 'ok';
    active('tok-step-2');
    clock = T0 - 3_600_000;
    expect(await call(v, route, 'tok-step-2')).toEqual({ consumer: 'user-7' });
    expect(calls() - before).toBe(2);
    // A cooldown started after the step lasts its 5 s on the new clock.
    mode = 'error';
    await unavailable(v, route, 'tok-step-3');
    clock += 4_000;
    await unavailable(v, route, 'tok-step-4');
    expect(calls() - before).toBe(3);
  });

  it('per route record, and configurable (0: off)', async () => {
    mode = 'error';
    const v = verifier();
    const one = introspectionRoute();
    const two = introspectionRoute(); // another route, or the next version of this one
    const before = calls();
    await unavailable(v, one, 'tok-route-1');
    await unavailable(v, one, 'tok-route-2');
    await unavailable(v, two, 'tok-route-3');
    expect(calls() - before).toBe(2);
    const off = new OAuth2Verifier({
      now: () => clock,
      outbound,
      introspectionFailureCooldownMs: 0,
    });
    await unavailable(off, one, 'tok-off-1');
    await unavailable(off, one, 'tok-off-2');
    expect(calls() - before).toBe(4);
    const longer = new OAuth2Verifier({
      now: () => clock,
      outbound,
      introspectionFailureCooldownMs: 30_000,
    });
    await unavailable(longer, one, 'tok-long-1');
    clock += 29_000;
    await unavailable(longer, one, 'tok-long-2');
    expect(calls() - before).toBe(5);
  });
});

describe('OAuth 2.0 with JWT access tokens (jwksUrl)', () => {
  const NOW_S = Math.floor(Date.now() / 1000);
  const jwtRoute = (extra: Partial<OAuth2> = {}) =>
    makeRoute({
      auth: {
        method: 'oauth2',
        oauth2: {
          issuer: ISSUER,
          audiences: [AUDIENCE],
          jwksUrl: `${base}/jwks.json`,
          algorithms: ['RS256'],
          clockToleranceSeconds: 30,
          requiredScopes: ['orders:write'],
          ...extra,
        },
      },
    });
  const sign = (claims: JWTPayload, typ = 'at+jwt') =>
    new SignJWT({ iss: ISSUER, aud: AUDIENCE, exp: NOW_S + 600, ...claims })
      .setProtectedHeader({ alg: 'RS256', kid: 'k1', typ })
      .sign(rsa.privateKey);
  let v: OAuth2Verifier;
  beforeAll(() => {
    v = new OAuth2Verifier({ jwt: new JwtVerifier({ outbound }) });
  });

  it('a token with the scope passes; consumer from client_id when there is no sub', async () => {
    const token = await sign({ client_id: 'svc', scope: 'orders:write' });
    expect(await v.authenticate(jwtRoute(), { authorization: `Bearer ${token}` })).toEqual({
      consumer: 'svc',
    });
  });

  it('missing scope → 403; a bad token → 401 before any scope check', async () => {
    const noScope = await sign({ sub: 'u', scope: 'orders:read' });
    const problem = await problemOf(() =>
      v.authenticate(jwtRoute(), { authorization: `Bearer ${noScope}` }),
    );
    expect(problem.code).toBe('HG_ERR_INSUFFICIENT_SCOPE');
    const wrongAud = await sign({ sub: 'u', scope: 'orders:write', aud: 'https://x.example' });
    const bad = await problemOf(() =>
      v.authenticate(jwtRoute(), { authorization: `Bearer ${wrongAud}` }),
    );
    expect(bad.code).toBe('HG_ERR_CREDENTIALS_INVALID');
  });

  it('requiredType: at+jwt passes (case-insensitive, application/ prefix too), an ID token (typ JWT) is 401', async () => {
    const route = jwtRoute({ requiredType: 'at+jwt' });
    const claims = { sub: 'u', scope: 'orders:write' };
    for (const typ of ['at+jwt', 'AT+JWT', 'application/at+jwt']) {
      const token = await sign(claims, typ);
      expect(await v.authenticate(route, { authorization: `Bearer ${token}` }), typ).toEqual({
        consumer: 'u',
      });
    }
    const idToken = await sign(claims, 'JWT');
    const problem = await problemOf(() =>
      v.authenticate(route, { authorization: `Bearer ${idToken}` }),
    );
    expect(problem.code).toBe('HG_ERR_CREDENTIALS_INVALID');
    expect(problem.headers['WWW-Authenticate']).toContain(
      'error_description="The token type is not accepted"',
    );
    // Without it, any typ is accepted (as before).
    expect(await v.authenticate(jwtRoute(), { authorization: `Bearer ${idToken}` })).toEqual({
      consumer: 'u',
    });
  });
});

describe('authenticate (dispatch on auth.method)', () => {
  let authenticate: ReturnType<typeof createAuthenticator>;
  beforeAll(() => {
    authenticate = createAuthenticator({ oauth2: verifier() });
  });

  it('none, or no auth at all → {}', async () => {
    expect(await authenticate(makeRoute(), {})).toEqual({});
    expect(await authenticate(makeRoute({ auth: { method: 'none' } }), {})).toEqual({});
  });

  it('apiKey → consumer, or 401', async () => {
    const route = makeRoute(
      { auth: { method: 'apiKey', apiKey: { header: 'X-API-Key', secretRef: { name: 'k' } } } },
      { apiKeys: [{ consumer: 'alice', sha256: sha256Hex('k-1') }] },
    );
    expect(await authenticate(route, { 'x-api-key': 'k-1' })).toEqual({ consumer: 'alice' });
    expect((await problemOf(() => authenticate(route, { 'x-api-key': 'k-2' }))).status).toBe(401);
  });

  it('oauth2 → verified by the given verifier', async () => {
    active('tok-dispatch');
    expect(
      await authenticate(introspectionRoute(), { authorization: 'Bearer tok-dispatch' }),
    ).toEqual({ consumer: 'user-7' });
  });

  it('a method without its settings is a server error', async () => {
    for (const method of ['apiKey', 'bearer', 'oauth2'] as const) {
      const problem = await problemOf(() =>
        authenticate(makeRoute({ auth: { method } }), { authorization: 'Bearer x' }),
      );
      expect(problem.status).toBeGreaterThanOrEqual(500);
    }
  });

  it('authHeaderNameFor names the header a CORS preflight must grant', () => {
    expect(authHeaderNameFor(makeRoute())).toBeUndefined();
    expect(
      authHeaderNameFor(
        makeRoute({
          auth: { method: 'apiKey', apiKey: { header: 'X-Shop-Key', secretRef: { name: 'k' } } },
        }),
      ),
    ).toBe('X-Shop-Key');
    expect(authHeaderNameFor(introspectionRoute())).toBe('Authorization');
  });
});
