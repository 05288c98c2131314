import { describe, expect, it } from 'vitest';
import {
  corsHeaders,
  isOriginAllowed,
  isPreflight,
  normaliseOrigin,
  preflight,
  type CorsConfig,
} from '../../runtime/gateway/security/cors.ts';
import { problemOf } from './fixtures.ts';

const base: CorsConfig = {
  enabled: true,
  allowedOrigins: ['https://example.com', 'http://localhost:3000'],
  allowCredentials: true,
  allowedHeaders: ['X-Tenant'],
  exposedHeaders: ['X-Request-ID', 'X-Correlation-ID'],
  maxAgeSeconds: 600,
};
const open: CorsConfig = { ...base, allowedOrigins: ['*'], allowCredentials: false };
const disabled: CorsConfig = { ...base, enabled: false };

describe('origin normalisation and matching', () => {
  it('normalises case and default ports', () => {
    expect(normaliseOrigin('HTTPS://Example.COM:443')).toBe('https://example.com');
    expect(normaliseOrigin('http://example.com:80')).toBe('http://example.com');
    expect(normaliseOrigin('https://example.com:8443')).toBe('https://example.com:8443');
  });

  it('refuses things that are not origins', () => {
    for (const o of [
      'null',
      '',
      'example.com',
      'ftp://example.com',
      'https://example.com/',
      'https://example.com/path',
      'https://user@example.com',
      'https://example.com?x',
      'https://example.com, https://evil.test',
      'javascript:alert(1)',
    ]) {
      expect(normaliseOrigin(o)).toBeUndefined();
    }
  });

  it('compares exactly: suffix, prefix and scheme tricks fail', () => {
    expect(isOriginAllowed(base, 'https://example.com')).toBe(true);
    expect(isOriginAllowed(base, 'https://EXAMPLE.com:443')).toBe(true);
    for (const o of [
      'https://evilexample.com',
      'https://example.com.evil.test',
      'https://sub.example.com',
      'http://example.com',
      'https://example.com:444',
      'http://localhost:3001',
      'null',
    ]) {
      expect(isOriginAllowed(base, o)).toBe(false);
    }
  });

  it('* allows any origin only without credentials', () => {
    expect(isOriginAllowed(open, 'https://anything.test')).toBe(true);
    expect(isOriginAllowed(open, 'null')).toBe(false);
    expect(isOriginAllowed({ ...open, allowCredentials: true }, 'https://anything.test')).toBe(
      false,
    );
  });
});

describe('corsHeaders (actual requests)', () => {
  it('an allowed origin with credentials: the origin echoed, never *', () => {
    expect(corsHeaders(base, 'https://example.com', 'POST')).toEqual({
      'Access-Control-Allow-Origin': 'https://example.com',
      'Access-Control-Allow-Credentials': 'true',
      'Access-Control-Expose-Headers': 'X-Request-ID, X-Correlation-ID',
      Vary: 'Origin',
    });
  });

  it('* without credentials answers *', () => {
    expect(corsHeaders(open, 'https://a.test', 'POST')).toEqual({
      'Access-Control-Allow-Origin': '*',
      'Access-Control-Expose-Headers': 'X-Request-ID, X-Correlation-ID',
      Vary: 'Origin',
    });
  });

  it('an evil origin on a credentialed endpoint: 403, nothing reflected', async () => {
    const problem = await problemOf(() => corsHeaders(base, 'https://evil.test', 'POST'));
    expect(problem.code).toBe('HG_ERR_CORS_ORIGIN_DENIED');
    expect(problem.status).toBe(403);
    expect(problem.headers).toEqual({ Vary: 'Origin' });
    expect(problem.headers).not.toHaveProperty('Access-Control-Allow-Origin');
  });

  it('the null origin and the suffix trick are refused', async () => {
    for (const o of ['null', 'https://evilexample.com']) {
      expect((await problemOf(() => corsHeaders(base, o, 'POST'))).code).toBe(
        'HG_ERR_CORS_ORIGIN_DENIED',
      );
    }
  });

  it('no Origin: not a browser CORS request, passes with Vary only', () => {
    expect(corsHeaders(base, undefined, 'POST')).toEqual({ Vary: 'Origin' });
    expect(corsHeaders(disabled, undefined, 'POST')).toEqual({});
    expect(corsHeaders(undefined, undefined, 'POST')).toEqual({});
  });

  it('CORS off: a cross-origin browser caller gets 403, a same-origin one passes', async () => {
    for (const cors of [disabled, undefined]) {
      const problem = await problemOf(() => corsHeaders(cors, 'https://example.com', 'POST'));
      expect(problem.code).toBe('HG_ERR_CORS_ORIGIN_DENIED');
      expect(problem.headers).toEqual({});
    }
    expect(
      corsHeaders(undefined, 'https://hooks.example.com', 'POST', 'https://hooks.example.com:443'),
    ).toEqual({});
  });
});

describe('preflight', () => {
  const methods = ['POST', 'PUT'];

  it('recognises a preflight', () => {
    expect(isPreflight('OPTIONS', 'https://example.com', 'POST')).toBe(true);
    expect(isPreflight('OPTIONS', 'https://example.com', undefined)).toBe(false);
    expect(isPreflight('OPTIONS', undefined, 'POST')).toBe(false);
    expect(isPreflight('POST', 'https://example.com', 'POST')).toBe(false);
  });

  it('answers an allowed origin with methods, granted headers, max age and Vary', () => {
    expect(
      preflight(
        base,
        'https://example.com',
        'POST',
        'Content-Type, X-API-Key, x-tenant, X-Secret-Stuff',
        methods,
        'X-API-Key',
      ),
    ).toEqual({
      'Access-Control-Allow-Origin': 'https://example.com',
      'Access-Control-Allow-Credentials': 'true',
      'Access-Control-Allow-Methods': 'POST, PUT',
      'Access-Control-Allow-Headers': 'content-type, x-api-key, x-tenant',
      'Access-Control-Max-Age': '600',
      Vary: 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers',
    });
  });

  it('Authorization is granted only when it is the auth header', () => {
    const bearer = preflight(
      base,
      'https://example.com',
      'POST',
      'authorization',
      methods,
      'Authorization',
    );
    expect(bearer['Access-Control-Allow-Headers']).toBe('authorization');
    const none = preflight(
      base,
      'https://example.com',
      'POST',
      'authorization',
      methods,
      undefined,
    );
    expect(none).not.toHaveProperty('Access-Control-Allow-Headers');
  });

  it('a method that is not enabled is not granted (the list stays the enabled methods)', () => {
    expect(
      preflight(base, 'https://example.com', 'DELETE', undefined, methods, undefined)[
        'Access-Control-Allow-Methods'
      ],
    ).toBe('POST, PUT');
  });

  it('evil origin, null origin, suffix trick, CORS off: 403', async () => {
    const cases: [CorsConfig | undefined, string | undefined][] = [
      [base, 'https://evil.test'],
      [base, 'null'],
      [base, 'https://evilexample.com'],
      [base, undefined],
      [disabled, 'https://example.com'],
      [undefined, 'https://example.com'],
    ];
    for (const [cors, origin] of cases) {
      const problem = await problemOf(() =>
        preflight(cors, origin, 'POST', 'content-type', methods, undefined),
      );
      expect(problem.code).toBe('HG_ERR_CORS_ORIGIN_DENIED');
    }
  });

  it('* without credentials preflights with *', () => {
    const headers = preflight(open, 'https://a.test', 'POST', undefined, methods, undefined);
    expect(headers['Access-Control-Allow-Origin']).toBe('*');
    expect(headers).not.toHaveProperty('Access-Control-Allow-Credentials');
  });
});
