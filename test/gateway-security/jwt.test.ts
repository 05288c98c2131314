import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import {
  SignJWT,
  exportJWK,
  exportSPKI,
  generateKeyPair,
  type CryptoKey,
  type JWK,
  type JWTPayload,
} from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { WebhookTriggerSpec } from '../../api/v1alpha1/index.ts';
import {
  JwtVerifier,
  authenticateBearer,
  bearerToken,
  jwksFetchCoolingDown,
} from '../../runtime/gateway/security/auth/jwt.ts';
import {
  LastGoodJwks,
  type StaleJwksUse,
} from '../../runtime/gateway/security/auth/jwks-last-good.ts';
import { createAuthenticator } from '../../runtime/gateway/security/auth/index.ts';
import type { ResolvedCredentials } from '../../api/records/records.ts';
import { OutboundGuard, OutboundRefusedError } from '../../runtime/engine/outbound/guard.ts';
import { makeRoute, problemOf } from './fixtures.ts';

const NOW = new Date('2026-11-23T08:00:00Z');
const NOW_S = Math.floor(NOW.getTime() / 1000);
const ISSUER = 'https://idp.example.com/';
const AUDIENCE = 'https://hooks.example.com';

type Bearer = NonNullable<NonNullable<WebhookTriggerSpec['auth']>['bearer']>;

let rsa: { publicKey: CryptoKey; privateKey: CryptoKey };
let other: { publicKey: CryptoKey; privateKey: CryptoKey };
let publicJwk: JWK;
let publicPem: string;
let jwks: FastifyInstance;
let jwksUrl = '';
let jwksHits = 0;
let jwksMode: 'ok' | 'error' | 'html' = 'ok';
let attackerHits = 0;

const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

function claims(extra: JWTPayload = {}): JWTPayload {
  return { iss: ISSUER, aud: AUDIENCE, sub: 'user-42', iat: NOW_S, exp: NOW_S + 300, ...extra };
}

async function sign(
  payload: JWTPayload,
  header: Record<string, unknown> = {},
  key: CryptoKey | Uint8Array = rsa.privateKey,
): Promise<string> {
  return new SignJWT(payload).setProtectedHeader({ alg: 'RS256', kid: 'k1', ...header }).sign(key);
}

function bearerRoute(
  bearer: Partial<Bearer>,
  credentials: ResolvedCredentials = {},
  generation = 1,
) {
  return makeRoute(
    {
      auth: {
        method: 'bearer',
        bearer: {
          issuer: ISSUER,
          audiences: [AUDIENCE],
          algorithms: ['RS256'],
          clockToleranceSeconds: 30,
          ...bearer,
        },
      },
    },
    credentials,
    'shop/jwt',
    generation,
  );
}

// The JWKS server listens on loopback: the cluster policy must name it (and the closed
// port 1 of the "unreachable" case). Made once the port is known.
let outbound: OutboundGuard;
const newVerifier = () => new JwtVerifier({ now: () => NOW, outbound });
let verifier: JwtVerifier;
const auth = (route: ReturnType<typeof bearerRoute>, token: string) =>
  authenticateBearer(route, { authorization: `Bearer ${token}` }, verifier);

async function invalid(route: ReturnType<typeof bearerRoute>, token: string, description: string) {
  const problem = await problemOf(() => auth(route, token));
  expect(problem.code).toBe('HG_ERR_CREDENTIALS_INVALID');
  expect(problem.status).toBe(401);
  expect(problem.headers['WWW-Authenticate']).toBe(
    `Bearer realm="hookgate", error="invalid_token", error_description="${description}"`,
  );
  return problem;
}

beforeAll(async () => {
  rsa = await generateKeyPair('RS256', { extractable: true });
  other = await generateKeyPair('RS256', { extractable: true });
  publicJwk = { ...(await exportJWK(rsa.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  publicPem = await exportSPKI(rsa.publicKey);
  jwks = Fastify();
  jwks.get('/jwks.json', async (_req, reply) => {
    jwksHits++;
    if (jwksMode === 'error') return reply.status(500).send({ error: 'boom' });
    if (jwksMode === 'html') return reply.type('text/html').send('<html>maintenance</html>');
    return { keys: [publicJwk] };
  });
  jwks.get('/attacker.json', async () => {
    attackerHits++;
    return { keys: [{ ...(await exportJWK(other.publicKey)), kid: 'k1' }] };
  });
  await jwks.listen({ host: '127.0.0.1', port: 0 });
  const port = (jwks.server.address() as AddressInfo).port;
  jwksUrl = `http://127.0.0.1:${port}/jwks.json`;
  outbound = new OutboundGuard({ allow: [`127.0.0.1:${port}`, '127.0.0.1:1'] });
  verifier = newVerifier();
});
afterAll(async () => {
  await jwks.close();
  await outbound.close();
});

describe('bearerToken', () => {
  it('no Authorization, or another scheme: 401 with a bare Bearer challenge', async () => {
    for (const headers of [{}, { authorization: 'Basic dXNlcjpwYXNz' }, { authorization: '' }]) {
      const problem = await problemOf(() => bearerToken(headers));
      expect(problem.code).toBe('HG_ERR_CREDENTIALS_MISSING');
      expect(problem.status).toBe(401);
      expect(problem.headers['WWW-Authenticate']).toBe('Bearer realm="hookgate"');
    }
  });

  it('a malformed Bearer value is invalid_token', async () => {
    for (const authorization of ['Bearer', 'Bearer a b', 'Bearer tok"en']) {
      const problem = await problemOf(() => bearerToken({ authorization }));
      expect(problem.headers['WWW-Authenticate']).toContain('error="invalid_token"');
    }
  });

  it('extracts the token, scheme case-insensitive', () => {
    expect(bearerToken({ authorization: 'bearer abc.def.ghi' })).toBe('abc.def.ghi');
  });
});

describe('JWT via a JWKS served on 127.0.0.1', () => {
  const route = () => bearerRoute({ jwksUrl, requiredType: 'at+jwt' });
  const at = { typ: 'at+jwt' };

  it('a valid RS256 access token authenticates; consumer = sub', async () => {
    expect(await auth(route(), await sign(claims(), at))).toEqual({ consumer: 'user-42' });
  });

  it('consumer falls back to client_id, then azp', async () => {
    expect(
      await auth(route(), await sign(claims({ sub: undefined, client_id: 'svc-1' }), at)),
    ).toEqual({
      consumer: 'svc-1',
    });
    expect(await auth(route(), await sign(claims({ sub: undefined, azp: 'svc-2' }), at))).toEqual({
      consumer: 'svc-2',
    });
  });

  it('an audience list naming one accepted audience passes', async () => {
    const token = await sign(claims({ aud: ['https://other.example', AUDIENCE] }), at);
    expect((await auth(route(), token)).consumer).toBe('user-42');
  });

  it('within clock tolerance passes; expired by tolerance + 1 s fails', async () => {
    expect((await auth(route(), await sign(claims({ exp: NOW_S - 29 }), at))).consumer).toBe(
      'user-42',
    );
    await invalid(route(), await sign(claims({ exp: NOW_S - 31 }), at), 'The token has expired');
  });

  it('not yet valid (nbf beyond tolerance)', async () => {
    await invalid(
      route(),
      await sign(claims({ nbf: NOW_S + 31 }), at),
      'The token is not yet valid',
    );
  });

  it('no exp at all', async () => {
    await invalid(
      route(),
      await sign(claims({ exp: undefined }), at),
      'The token has no expiry time',
    );
  });

  it('wrong issuer (also a near miss without the trailing slash)', async () => {
    for (const iss of ['https://evil.example.com/', 'https://idp.example.com']) {
      await invalid(route(), await sign(claims({ iss }), at), 'The token issuer is not accepted');
    }
  });

  it('wrong audience', async () => {
    await invalid(
      route(),
      await sign(claims({ aud: 'https://other.example' }), at),
      'The token audience is not accepted',
    );
  });

  it('alg: none is refused', async () => {
    const token = `${b64url({ alg: 'none', typ: 'at+jwt', kid: 'k1' })}.${b64url(claims())}.`;
    await invalid(route(), token, 'The token signing algorithm is not accepted');
  });

  it('HS256 signed with the RSA public key (PEM) as HMAC secret is refused', async () => {
    const token = await sign(
      claims(),
      { alg: 'HS256', ...at },
      new TextEncoder().encode(publicPem),
    );
    await invalid(route(), token, 'The token signing algorithm is not accepted');
  });

  it('kid "../../x" finds no key', async () => {
    await invalid(
      route(),
      await sign(claims(), { kid: '../../x', ...at }),
      'No known key matches the token',
    );
  });

  it('an ID token (typ JWT) where at+jwt is required is refused', async () => {
    await invalid(route(), await sign(claims(), { typ: 'JWT' }), 'The token type is not accepted');
    await invalid(route(), await sign(claims()), 'The token type is not accepted');
  });

  it('a token signed by another key under a known kid fails the signature check', async () => {
    const token = await sign(claims(), at, other.privateKey);
    await invalid(route(), token, 'The token signature is invalid');
  });

  it('jku and x5u in the header are ignored (never fetched)', async () => {
    const attackerUrl = jwksUrl.replace('jwks.json', 'attacker.json');
    const token = await sign(
      claims(),
      { ...at, jku: attackerUrl, x5u: attackerUrl },
      other.privateKey,
    );
    await invalid(route(), token, 'The token signature is invalid');
    expect(attackerHits).toBe(0);
  });

  it('garbage tokens are malformed', async () => {
    await invalid(route(), 'abc.def.ghi', 'The token is malformed');
    await invalid(route(), 'notajwt', 'The token is malformed');
  });

  it('the JWKS is fetched once and reused across requests', async () => {
    const r = bearerRoute({ jwksUrl, requiredType: 'at+jwt' }, {}, 7);
    const before = jwksHits;
    for (let i = 0; i < 5; i++) await auth(r, await sign(claims(), at));
    expect(jwksHits - before).toBe(1);
  });

  it('the key is kept with the route record: a new record of the route fetches again', async () => {
    const fresh = newVerifier();
    const first = bearerRoute({ jwksUrl, requiredType: 'at+jwt' }, {}, 8);
    const before = jwksHits;
    const check = (route: ReturnType<typeof bearerRoute>, token: string) =>
      authenticateBearer(route, { authorization: `Bearer ${token}` }, fresh);
    await check(first, await sign(claims(), at));
    await check(first, await sign(claims(), at));
    expect(jwksHits - before).toBe(1);
    // The route table makes a new record object when the route changes (generation,
    // key material): its key set is fetched anew, the old one goes with the old record.
    await check(bearerRoute({ jwksUrl, requiredType: 'at+jwt' }, {}, 9), await sign(claims(), at));
    expect(jwksHits - before).toBe(2);
  });

  it('JWKS endpoint failing (500) or unreachable → 503 auth-unavailable (fail closed)', async () => {
    const fresh = newVerifier();
    jwksMode = 'error';
    try {
      // a malformed token is judged without the JWKS: still a 401
      const problem = await problemOf(() =>
        authenticateBearer(route(), { authorization: 'Bearer x.y.z' }, fresh),
      );
      expect(problem.code).toBe('HG_ERR_CREDENTIALS_INVALID');
      const token = await sign(claims(), at);
      const down = await problemOf(() =>
        authenticateBearer(route(), { authorization: `Bearer ${token}` }, fresh),
      );
      expect(down.code).toBe('HG_ERR_AUTH_UNAVAILABLE');
      expect(down.status).toBe(503);
    } finally {
      jwksMode = 'ok';
    }
    const nowhere = bearerRoute({ jwksUrl: 'http://127.0.0.1:1/jwks.json' });
    const token = await sign(claims(), at);
    const problem = await problemOf(() =>
      authenticateBearer(nowhere, { authorization: `Bearer ${token}` }, fresh),
    );
    expect(problem.code).toBe('HG_ERR_AUTH_UNAVAILABLE');
  });
});

describe('JWKS fetches while the provider fails (cooldown)', () => {
  const at = { typ: 'at+jwt' };
  let ms = NOW.getTime();
  const clocked = (options: { jwksCooldownMs?: number } = {}) =>
    new JwtVerifier({ now: () => new Date(ms), outbound, ...options });
  const check = (v: JwtVerifier, route: ReturnType<typeof bearerRoute>, token: string) =>
    authenticateBearer(route, { authorization: `Bearer ${token}` }, v);
  const failing = async (mode: 'error' | 'html', body: () => Promise<void>) => {
    jwksMode = mode;
    try {
      await body();
    } finally {
      jwksMode = 'ok';
    }
  };

  it('a failing JWKS is fetched at most once per cooldown (5 s); valid tokens work after it', async () => {
    ms = NOW.getTime();
    const v = clocked();
    const r = bearerRoute({ jwksUrl, requiredType: 'at+jwt' }, {}, 21);
    const token = await sign(claims(), at);
    const before = jwksHits;
    await failing('error', async () => {
      for (let i = 0; i < 20; i++) {
        const problem = await problemOf(() => check(v, r, token));
        expect(problem.code).toBe('HG_ERR_AUTH_UNAVAILABLE');
        expect(problem.headers['Retry-After']).toBe('5');
      }
      expect(jwksHits - before).toBe(1);
      // 20 at once: still the one fetch (jose's single flight, then the cooldown)
      await Promise.all(Array.from({ length: 20 }, () => problemOf(() => check(v, r, token))));
      expect(jwksHits - before).toBe(1);
      ms += 5_000; // the cooldown is over: one fetch, failing again, a new cooldown
      for (let i = 0; i < 5; i++) await problemOf(() => check(v, r, token));
      expect(jwksHits - before).toBe(2);
    });
    // The provider is back, but the cooldown is not over: answered as the failure was.
    ms += 4_000;
    expect((await problemOf(() => check(v, r, token))).code).toBe('HG_ERR_AUTH_UNAVAILABLE');
    expect(jwksHits - before).toBe(2);
    ms += 1_000;
    expect(await check(v, r, token)).toEqual({ consumer: 'user-42' });
    expect(await check(v, r, token)).toEqual({ consumer: 'user-42' });
    expect(jwksHits - before).toBe(3);
  });

  it('an answer that is not a key set (a 200 maintenance page) starts the cooldown too', async () => {
    ms = NOW.getTime();
    const v = clocked();
    const r = bearerRoute({ jwksUrl, requiredType: 'at+jwt' }, {}, 22);
    const token = await sign(claims(), at);
    const before = jwksHits;
    await failing('html', async () => {
      for (let i = 0; i < 10; i++) {
        expect((await problemOf(() => check(v, r, token))).code).toBe('HG_ERR_AUTH_UNAVAILABLE');
      }
    });
    expect(jwksHits - before).toBe(1);
  });

  it('tokens whose key the set holds are verified meanwhile: only fetches wait', async () => {
    ms = NOW.getTime();
    // jose's own refetch cooldown off, so that every unknown kid would fetch again
    const v = clocked({ jwksCooldownMs: 0 });
    const r = bearerRoute({ jwksUrl, requiredType: 'at+jwt' }, {}, 23);
    const good = await sign(claims(), at);
    expect(await check(v, r, good)).toEqual({ consumer: 'user-42' });
    const before = jwksHits;
    await failing('error', async () => {
      for (let i = 0; i < 10; i++) {
        const unknownKid = await sign(claims(), { ...at, kid: `made-up-${i}` });
        expect((await problemOf(() => check(v, r, unknownKid))).code).toBe(
          'HG_ERR_AUTH_UNAVAILABLE',
        );
        expect(await check(v, r, good)).toEqual({ consumer: 'user-42' });
      }
    });
    expect(jwksHits - before).toBe(1);
  });

  it('a clock stepped back does not lengthen it: over once its end is further than 5 s away', async () => {
    let now = NOW.getTime();
    let sent = 0;
    let up = false;
    const send = () => {
      sent++;
      return Promise.resolve(
        up ? Response.json({ keys: [] }) : new Response('down', { status: 502 }),
      );
    };
    const fetchJwks = jwksFetchCoolingDown(send, 5_000, () => now);
    const get = () => fetchJwks(jwksUrl, { method: 'GET' });
    expect((await get()).status).toBe(503);
    expect(sent).toBe(1);
    // The wall clock steps back an hour (NTP, a resumed VM); the provider is back.
    up = true;
    now -= 3_600_000;
    expect((await get()).status).toBe(200);
    expect(sent).toBe(2);
    // A cooldown started after the step lasts its 5 s on the new clock.
    up = false;
    await get();
    now += 4_000;
    expect((await get()).status).toBe(503);
    expect(sent).toBe(3);
  });
});

describe('a key set whose refresh fails keeps verifying for a bounded time (24 h)', () => {
  // One clock for jose's cache age and the verifier: the system time, faked (Date only;
  // timers and sockets are real).
  afterEach(() => {
    vi.useRealTimers();
  });
  const HOUR = 3_600_000;
  const at = { typ: 'at+jwt' };
  const check = (v: JwtVerifier, route: ReturnType<typeof bearerRoute>, token: string) =>
    authenticateBearer(route, { authorization: `Bearer ${token}` }, v);
  const longLived = () => sign(claims({ exp: NOW_S + 3 * 24 * 3600 }), at);

  it('past the cache age, a failed refresh verifies with the last set until 24 h after its fetch, then 503', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: NOW });
    const uses: StaleJwksUse[] = [];
    const v = new JwtVerifier({ outbound, onJwksStale: (_route, use) => uses.push(use) });
    const r = bearerRoute({ jwksUrl, requiredType: 'at+jwt' }, {}, 31);
    const token = await longLived();
    const before = jwksHits;
    expect(await check(v, r, token)).toEqual({ consumer: 'user-42' });
    jwksMode = 'error';
    try {
      vi.setSystemTime(NOW.getTime() + 11 * 60_000); // past the 10 min cache age
      expect(await check(v, r, token)).toEqual({ consumer: 'user-42' });
      expect(jwksHits - before).toBe(2); // the refresh was tried
      expect(uses).toEqual([
        expect.objectContaining({ failedRefreshes: 1, ageMs: 11 * 60_000, reason: 'HTTP 503' }),
      ]);
      // Held for another cache age: no refetch per request.
      for (let i = 0; i < 5; i++) expect(await check(v, r, token)).toEqual({ consumer: 'user-42' });
      expect(jwksHits - before).toBe(2);
      // A kid the old set lacks may be a newer key the provider could not give: 503.
      const newKid = await sign(claims({ exp: NOW_S + 3 * 24 * 3600 }), { ...at, kid: 'k2' });
      expect((await problemOf(() => check(v, r, newKid))).code).toBe('HG_ERR_AUTH_UNAVAILABLE');
      vi.setSystemTime(NOW.getTime() + 23 * HOUR);
      expect(await check(v, r, token)).toEqual({ consumer: 'user-42' });
      expect(uses.at(-1)?.failedRefreshes).toBe(2);
      // 24 h after the fetch: fail closed, and the fetches stay within the cooldown.
      vi.setSystemTime(NOW.getTime() + 24 * HOUR);
      for (let i = 0; i < 5; i++) {
        expect((await problemOf(() => check(v, r, token))).code).toBe('HG_ERR_AUTH_UNAVAILABLE');
      }
      expect(jwksHits - before).toBe(4);
    } finally {
      jwksMode = 'ok';
    }
    vi.setSystemTime(NOW.getTime() + 24 * HOUR + 5_000); // the cooldown is over
    expect(await check(v, r, token)).toEqual({ consumer: 'user-42' });
    expect(jwksHits - before).toBe(5);
  });

  it('the authenticator passes onJwksStale to its verifier (the serving roles log it)', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: NOW });
    const told: string[] = [];
    const authenticator = createAuthenticator({
      outbound,
      onJwksStale: (route, use) => told.push(`${route.key} ${use.failedRefreshes}`),
    });
    const r = bearerRoute({ jwksUrl, requiredType: 'at+jwt' }, {}, 33);
    const headers = { authorization: `Bearer ${await longLived()}` };
    expect(await authenticator(r, headers)).toEqual({ consumer: 'user-42' });
    jwksMode = 'error';
    try {
      vi.setSystemTime(NOW.getTime() + 11 * 60_000);
      expect(await authenticator(r, headers)).toEqual({ consumer: 'user-42' });
    } finally {
      jwksMode = 'ok';
    }
    expect(told).toEqual([`${r.key} 1`]);
  });

  it('jwksMaxStaleMs 0 keeps the old behaviour: 503 once the set is due', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: NOW });
    const v = new JwtVerifier({ outbound, jwksMaxStaleMs: 0 });
    const r = bearerRoute({ jwksUrl, requiredType: 'at+jwt' }, {}, 32);
    const token = await longLived();
    expect(await check(v, r, token)).toEqual({ consumer: 'user-42' });
    jwksMode = 'error';
    try {
      vi.setSystemTime(NOW.getTime() + 11 * 60_000);
      expect((await problemOf(() => check(v, r, token))).code).toBe('HG_ERR_AUTH_UNAVAILABLE');
    } finally {
      jwksMode = 'ok';
    }
  });

  it('a refresh refused by the outbound policy is not answered from the old set', async () => {
    let now = NOW.getTime();
    let refuse = false;
    const send = () =>
      refuse
        ? Promise.reject(new OutboundRefusedError('destination not allowed'))
        : Promise.resolve(Response.json({ keys: [] }));
    const lastGood = new LastGoodJwks(24 * HOUR, () => now, undefined);
    const get = lastGood.wrap(send);
    expect((await get(jwksUrl, { method: 'GET' })).status).toBe(200);
    refuse = true;
    now += HOUR;
    await expect(get(jwksUrl, { method: 'GET' })).rejects.toThrow('destination not allowed');
    expect(lastGood.failedRefreshes).toBe(1);
  });
});

describe('JWT with a static key (keySecretRef)', () => {
  it('an RS256 PEM key verifies RS256 tokens and refuses the HS256 confusion', async () => {
    const route = bearerRoute({}, { jwtKey: publicPem });
    expect((await auth(route, await sign(claims()))).consumer).toBe('user-42');
    const forged = await sign(claims(), { alg: 'HS256' }, new TextEncoder().encode(publicPem));
    await invalid(route, forged, 'The token signing algorithm is not accepted');
  });

  it('a JWK key works too', async () => {
    const route = bearerRoute({}, { jwtKey: JSON.stringify(publicJwk) });
    expect((await auth(route, await sign(claims()))).consumer).toBe('user-42');
  });

  it('an HS256 shared secret verifies HS256 and refuses RS256 and none', async () => {
    const secret = 'a-shared-secret-of-at-least-32-bytes!!';
    const route = bearerRoute({ algorithms: ['HS256'] }, { jwtKey: secret });
    const good = await sign(claims(), { alg: 'HS256' }, new TextEncoder().encode(secret));
    expect((await auth(route, good)).consumer).toBe('user-42');
    await invalid(route, await sign(claims()), 'The token signing algorithm is not accepted');
    const none = `${b64url({ alg: 'none' })}.${b64url(claims())}.`;
    await invalid(route, none, 'The token signing algorithm is not accepted');
    const wrong = await sign(
      claims(),
      { alg: 'HS256' },
      new TextEncoder().encode('another-secret-000000000000000000'),
    );
    await invalid(route, wrong, 'The token signature is invalid');
  });

  it('an HS* secret shorter than its hash (RFC 7518 §3.2) is not usable: 503, even for a token it signed', async () => {
    // A short shared secret can be found offline from one token, then tokens forged.
    for (const [alg, bytes] of [
      ['HS256', 32],
      ['HS384', 48],
      ['HS512', 64],
    ] as const) {
      const short = 's'.repeat(bytes - 1);
      const route = bearerRoute({ algorithms: [alg] }, { jwtKey: short });
      const token = await sign(claims(), { alg }, new TextEncoder().encode(short));
      const problem = await problemOf(() => auth(route, token));
      expect(problem.code, alg).toBe('HG_ERR_AUTH_UNAVAILABLE');
      // Long enough: the same algorithm verifies.
      const enough = 's'.repeat(bytes);
      const ok = bearerRoute({ algorithms: [alg] }, { jwtKey: enough });
      const signed = await sign(claims(), { alg }, new TextEncoder().encode(enough));
      expect((await auth(ok, signed)).consumer, alg).toBe('user-42');
    }
    // Bytes, not characters: 16 two-byte characters are 32 bytes.
    const wide = 'é'.repeat(16);
    const route = bearerRoute({ algorithms: ['HS256'] }, { jwtKey: wide });
    const token = await sign(claims(), { alg: 'HS256' }, new TextEncoder().encode(wide));
    expect((await auth(route, token)).consumer).toBe('user-42');
  });

  it('an unusable key, or several algorithms with a static key → 503', async () => {
    for (const route of [
      bearerRoute({}, { jwtKey: 'not a key' }),
      bearerRoute({}, {}),
      bearerRoute({ algorithms: ['RS256', 'HS256'] }, { jwtKey: publicPem }),
    ]) {
      const problem = await problemOf(async () => auth(route, await sign(claims())));
      expect(problem.code).toBe('HG_ERR_AUTH_UNAVAILABLE');
    }
  });

  it('a rotated key (same generation, new Secret value) is picked up', async () => {
    const r1 = bearerRoute({}, { jwtKey: publicPem }, 9);
    expect((await auth(r1, await sign(claims()))).consumer).toBe('user-42');
    const r2 = bearerRoute({}, { jwtKey: await exportSPKI(other.publicKey) }, 9);
    await invalid(r2, await sign(claims()), 'The token signature is invalid');
    expect((await auth(r2, await sign(claims(), {}, other.privateKey))).consumer).toBe('user-42');
  });
});
