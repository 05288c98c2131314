// requireHttps (spec: "requests over HTTP are refused when require HTTPS is on";
// acceptance rule G11).
//
// A request counts as HTTPS only when it arrived over TLS, or when the peer that
// connected to us is a trusted proxy (its address inside one of the configured CIDRs)
// and it said `X-Forwarded-Proto: https`. X-Forwarded-Proto from anybody else is
// ignored, so a direct client cannot claim HTTPS. When the header lists several values
// (proxies that append), every value must be https. `Forwarded: proto=` (RFC 7239) is
// not consulted. Do not use Fastify's `request.protocol` for this: with a permissive
// `trustProxy` it believes any client.
import ipaddr from 'ipaddr.js';
import { HttpProblem } from '../../errors.ts';
import type { RouteRecord } from '../../../api/records/records.ts';
import { headerValue, type HeaderMap } from './headers.ts';

/** What isHttps needs to know about the connection. */
export interface RequestConnectionInfo {
  /** True when the socket is a TLS socket (`(req.socket as TLSSocket).encrypted`). */
  encrypted: boolean;
  /** The peer address of the TCP connection (`req.socket.remoteAddress`). */
  remoteAddress: string | undefined;
  headers: HeaderMap;
}

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

/**
 * Parses proxy CIDRs (`10.0.0.0/8`, `fd00::/8`) or single addresses (`127.0.0.1`).
 * Throws on an invalid entry, so a bad setting fails at startup, not per request.
 */
export function parseTrustedProxies(cidrs: readonly string[]): Range[] {
  return cidrs.map((entry) => {
    const text = entry.trim();
    try {
      if (text.includes('/')) return ipaddr.parseCIDR(text);
      const address = ipaddr.parse(text);
      return [address, address.kind() === 'ipv4' ? 32 : 128];
    } catch {
      throw new Error(`invalid trusted proxy address or CIDR: ${JSON.stringify(entry)}`);
    }
  });
}

const parsedCache = new Map<string, Range[]>();

function rangesFor(cidrs: readonly string[]): Range[] {
  const cacheKey = cidrs.join(',');
  let ranges = parsedCache.get(cacheKey);
  if (!ranges) {
    ranges = parseTrustedProxies(cidrs);
    parsedCache.set(cacheKey, ranges);
  }
  return ranges;
}

/** Whether `address` lies in one of the CIDRs (IPv4-mapped IPv6 counts as IPv4). */
export function isTrustedProxy(address: string | undefined, cidrs: readonly string[]): boolean {
  if (!address || cidrs.length === 0 || !ipaddr.isValid(address)) return false;
  // ::ffff:10.1.2.3 → 10.1.2.3 (Node reports IPv4 peers this way on dual-stack sockets).
  const peer = ipaddr.process(address);
  return rangesFor(cidrs).some(
    ([range, bits]) => range.kind() === peer.kind() && peer.match(range, bits),
  );
}

/** True when the request arrived over TLS or through a trusted proxy that saw HTTPS. */
export function isHttps(req: RequestConnectionInfo, trustedProxies: readonly string[]): boolean {
  if (req.encrypted) return true;
  if (!isTrustedProxy(req.remoteAddress, trustedProxies)) return false;
  const forwarded = headerValue(req.headers, 'x-forwarded-proto');
  if (forwarded === undefined) return false;
  const values = forwarded.split(',').map((v) => v.trim().toLowerCase());
  return values.length > 0 && values.every((v) => v === 'https');
}

/** Throws 403 https-required when the route requires HTTPS and the request is not. */
export function checkHttps(
  route: RouteRecord,
  req: RequestConnectionInfo,
  trustedProxies: readonly string[],
): void {
  if (!route.spec.requireHttps) return;
  if (isHttps(req, trustedProxies)) return;
  throw new HttpProblem('HG_ERR_HTTPS_REQUIRED', 'This endpoint accepts HTTPS requests only.');
}
