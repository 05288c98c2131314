import { describe, expect, it } from 'vitest';
import { authenticateApiKey } from '../../runtime/gateway/security/auth/api-key.ts';
import { headerValue, type HeaderMap } from '../../runtime/gateway/security/headers.ts';
import { makeRoute, problemOf, sha256Hex } from './fixtures.ts';

const route = makeRoute(
  { auth: { method: 'apiKey', apiKey: { header: 'X-API-Key', secretRef: { name: 'keys' } } } },
  {
    apiKeys: [
      { consumer: 'alice', sha256: sha256Hex('alice-key-0123456789') },
      { consumer: 'bob', sha256: sha256Hex('bob-key-abcdefghij') },
    ],
  },
);

describe('API key authentication', () => {
  it('accepts a stored key and names its consumer', () => {
    expect(authenticateApiKey(route, { 'x-api-key': 'bob-key-abcdefghij' })).toEqual({
      consumer: 'bob',
    });
    expect(authenticateApiKey(route, { 'x-api-key': 'alice-key-0123456789' })).toEqual({
      consumer: 'alice',
    });
  });

  it('looks the header up case-insensitively', () => {
    expect(authenticateApiKey(route, { 'X-Api-Key': 'bob-key-abcdefghij' }).consumer).toBe('bob');
  });

  it('missing header: 401 credentials-missing with an ApiKey challenge', async () => {
    const problem = await problemOf(() => authenticateApiKey(route, {}));
    expect(problem.code).toBe('HG_ERR_CREDENTIALS_MISSING');
    expect(problem.status).toBe(401);
    expect(problem.headers['WWW-Authenticate']).toBe('ApiKey header="X-API-Key"');
  });

  it('empty header value counts as missing', async () => {
    const problem = await problemOf(() => authenticateApiKey(route, { 'x-api-key': '  ' }));
    expect(problem.code).toBe('HG_ERR_CREDENTIALS_MISSING');
  });

  it('a valid key in a different header than configured is a 401', async () => {
    const problem = await problemOf(() =>
      authenticateApiKey(route, {
        authorization: 'bob-key-abcdefghij',
        'x-key': 'bob-key-abcdefghij',
      }),
    );
    expect(problem.status).toBe(401);
    expect(problem.code).toBe('HG_ERR_CREDENTIALS_MISSING');
  });

  it('wrong key: 401 credentials-invalid', async () => {
    const problem = await problemOf(() =>
      authenticateApiKey(route, { 'x-api-key': 'bob-key-abcdefghiJ' }),
    );
    expect(problem.code).toBe('HG_ERR_CREDENTIALS_INVALID');
    expect(problem.status).toBe(401);
    expect(problem.headers['WWW-Authenticate']).toBe('ApiKey header="X-API-Key"');
    expect(problem.message).not.toContain('bob-key');
  });

  it('wrong-length keys (1 byte, 10 kB, multi-byte) are a clean 401, never a crash', async () => {
    for (const key of ['x', 'k'.repeat(10_000), 'é😀', 'bob-key-abcdefghij ']) {
      const problem = await problemOf(() => authenticateApiKey(route, { 'x-api-key': key }));
      expect(problem.code).toBe('HG_ERR_CREDENTIALS_INVALID');
    }
  });

  it('a key repeated in two headers is refused (Node joins them)', async () => {
    const problem = await problemOf(() =>
      authenticateApiKey(route, { 'x-api-key': ['bob-key-abcdefghij', 'bob-key-abcdefghij'] }),
    );
    expect(problem.code).toBe('HG_ERR_CREDENTIALS_INVALID');
  });

  it('uses the configured header name', async () => {
    const custom = makeRoute(
      { auth: { method: 'apiKey', apiKey: { header: 'X-Shop-Token', secretRef: { name: 'k' } } } },
      { apiKeys: [{ consumer: 'carol', sha256: sha256Hex('carol-key') }] },
    );
    expect(authenticateApiKey(custom, { 'x-shop-token': 'carol-key' }).consumer).toBe('carol');
    const problem = await problemOf(() => authenticateApiKey(custom, { 'x-api-key': 'carol-key' }));
    expect(problem.code).toBe('HG_ERR_CREDENTIALS_MISSING');
    expect(problem.headers['WWW-Authenticate']).toBe('ApiKey header="X-Shop-Token"');
  });

  it('a header named like an Object method (constructor, toString, __proto__) is read, never inherited', async () => {
    // Node's request headers are a plain object: headers.constructor is Object, and
    // reading it as the key crashed every request of the endpoint with a 500.
    for (const header of ['constructor', 'toString', 'valueOf', 'hasOwnProperty', '__proto__']) {
      const odd = makeRoute(
        { auth: { method: 'apiKey', apiKey: { header, secretRef: { name: 'k' } } } },
        { apiKeys: [{ consumer: 'dave', sha256: sha256Hex('dave-key-0123456789') }] },
      );
      const problem = await problemOf(() => authenticateApiKey(odd, {}));
      expect(problem.code, header).toBe('HG_ERR_CREDENTIALS_MISSING');
      expect(headerValue({}, header), header).toBeUndefined();
      // A header Node can hold (it drops one named __proto__) is read as any other.
      if (header === '__proto__') continue;
      const sent: HeaderMap = {};
      Object.defineProperty(sent, header.toLowerCase(), {
        value: 'dave-key-0123456789',
        enumerable: true,
      });
      expect(authenticateApiKey(odd, sent).consumer, header).toBe('dave');
    }
  });

  it('no stored keys, or malformed stored digests, match nothing', async () => {
    const broken = makeRoute(
      { auth: { method: 'apiKey', apiKey: { header: 'X-API-Key', secretRef: { name: 'k' } } } },
      {
        apiKeys: [
          { consumer: 'eve', sha256: 'abc' },
          { consumer: 'eve2', sha256: 'zz'.repeat(32) },
        ],
      },
    );
    for (const r of [broken, makeRoute({}, {})]) {
      const problem = await problemOf(() => authenticateApiKey(r, { 'x-api-key': 'abc' }));
      expect(problem.code).toBe('HG_ERR_CREDENTIALS_INVALID');
    }
  });

  it('a stored digest in upper-case hex matches too', () => {
    const upper = makeRoute(
      { auth: { method: 'apiKey', apiKey: { header: 'X-API-Key', secretRef: { name: 'k' } } } },
      { apiKeys: [{ consumer: 'dave', sha256: sha256Hex('dave-key').toUpperCase() }] },
    );
    expect(authenticateApiKey(upper, { 'x-api-key': 'dave-key' }).consumer).toBe('dave');
  });

  it('a new credentials list (a rotated Secret) is used at once', async () => {
    const before = makeRoute(
      { auth: { method: 'apiKey', apiKey: { header: 'X-API-Key', secretRef: { name: 'k' } } } },
      { apiKeys: [{ consumer: 'old', sha256: sha256Hex('old-key') }] },
    );
    expect(authenticateApiKey(before, { 'x-api-key': 'old-key' }).consumer).toBe('old');
    const after = {
      ...before,
      credentials: { apiKeys: [{ consumer: 'new', sha256: sha256Hex('new-key') }] },
    };
    expect(authenticateApiKey(after, { 'x-api-key': 'new-key' }).consumer).toBe('new');
    const problem = await problemOf(() => authenticateApiKey(after, { 'x-api-key': 'old-key' }));
    expect(problem.code).toBe('HG_ERR_CREDENTIALS_INVALID');
  });
});
