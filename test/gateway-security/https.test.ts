import { describe, expect, it } from 'vitest';
import {
  checkHttps,
  isHttps,
  isTrustedProxy,
  parseTrustedProxies,
} from '../../runtime/gateway/security/https.ts';
import { makeRoute, problemOf } from './fixtures.ts';

const proxies = ['10.0.0.0/8', '192.168.1.7', 'fd00::/8'];
const req = (
  remoteAddress: string | undefined,
  headers: Record<string, string> = {},
  encrypted = false,
) => ({
  encrypted,
  remoteAddress,
  headers,
});

describe('isHttps', () => {
  it('a TLS connection is HTTPS, whoever connects', () => {
    expect(isHttps(req('203.0.113.9', {}, true), [])).toBe(true);
  });

  it('plain HTTP without headers is not', () => {
    expect(isHttps(req('203.0.113.9'), proxies)).toBe(false);
    expect(isHttps(req('10.1.2.3'), proxies)).toBe(false);
  });

  it('a trusted proxy sending X-Forwarded-Proto: https is HTTPS', () => {
    expect(isHttps(req('10.1.2.3', { 'x-forwarded-proto': 'https' }), proxies)).toBe(true);
    expect(isHttps(req('192.168.1.7', { 'x-forwarded-proto': 'HTTPS' }), proxies)).toBe(true);
    expect(isHttps(req('fd12::1', { 'x-forwarded-proto': 'https' }), proxies)).toBe(true);
    // IPv4-mapped IPv6 peer address of a trusted IPv4 proxy
    expect(isHttps(req('::ffff:10.9.9.9', { 'x-forwarded-proto': 'https' }), proxies)).toBe(true);
  });

  it('a spoofed X-Forwarded-Proto from an untrusted address is ignored', () => {
    for (const address of [
      '203.0.113.9',
      '192.168.1.8',
      '11.0.0.1',
      '::1',
      '2001:db8::1',
      undefined,
    ]) {
      expect(isHttps(req(address, { 'x-forwarded-proto': 'https' }), proxies)).toBe(false);
    }
    // with no trusted proxies configured, nobody is believed
    expect(isHttps(req('10.1.2.3', { 'x-forwarded-proto': 'https' }), [])).toBe(false);
  });

  it('a trusted proxy saying http, or a mixed list, is not HTTPS', () => {
    expect(isHttps(req('10.1.2.3', { 'x-forwarded-proto': 'http' }), proxies)).toBe(false);
    expect(isHttps(req('10.1.2.3', { 'x-forwarded-proto': 'https, http' }), proxies)).toBe(false);
    expect(isHttps(req('10.1.2.3', { 'x-forwarded-proto': 'https,https' }), proxies)).toBe(true);
    expect(isHttps(req('10.1.2.3', { 'x-forwarded-proto': '' }), proxies)).toBe(false);
  });

  it('garbage peer addresses are not trusted', () => {
    expect(isTrustedProxy('not-an-ip', proxies)).toBe(false);
    expect(isTrustedProxy('10.1.2.3', proxies)).toBe(true);
  });

  it('invalid CIDRs are refused when parsed', () => {
    expect(() => parseTrustedProxies(['10.0.0.0/33'])).toThrow(/invalid trusted proxy/);
    expect(() => parseTrustedProxies(['example.com'])).toThrow(/invalid trusted proxy/);
  });
});

describe('checkHttps', () => {
  const strict = makeRoute({ requireHttps: true });

  it('plain HTTP to a requireHttps route: 403 https-required', async () => {
    const problem = await problemOf(() => checkHttps(strict, req('203.0.113.9'), proxies));
    expect(problem.code).toBe('HG_ERR_HTTPS_REQUIRED');
    expect(problem.status).toBe(403);
  });

  it('spoofed XFP from a direct client: still 403', async () => {
    const problem = await problemOf(() =>
      checkHttps(strict, req('203.0.113.9', { 'x-forwarded-proto': 'https' }), proxies),
    );
    expect(problem.code).toBe('HG_ERR_HTTPS_REQUIRED');
  });

  it('TLS, or a trusted proxy with XFP https, passes', () => {
    expect(() => checkHttps(strict, req('203.0.113.9', {}, true), proxies)).not.toThrow();
    expect(() =>
      checkHttps(strict, req('10.0.0.1', { 'x-forwarded-proto': 'https' }), proxies),
    ).not.toThrow();
  });

  it('routes without requireHttps accept plain HTTP', () => {
    expect(() => checkHttps(makeRoute(), req('203.0.113.9'), [])).not.toThrow();
  });
});
