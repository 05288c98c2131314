// Destinations no outbound policy can open: cloud metadata services and the unspecified
// addresses. The runtime's guard refuses them whatever the policy says
// (runtime/engine/outbound/policy.ts, class "never"); the operator uses the same lists
// to report, when a resource is applied, a URL written into its spec that could never
// be reached (a JWKS, an introspection endpoint, an http node's target).
import ipaddr from 'ipaddr.js';
import { parseIp, type Cidr, type Ip } from './outbound-entries.ts';

/**
 * Cloud metadata and instance-identity endpoints: AWS/GCP/Azure/OpenStack/Oracle
 * (169.254.169.254, fd00:ec2::254), AWS ECS task metadata (169.254.170.2), EKS Pod
 * Identity (169.254.170.23, fd00:ec2::23), Alibaba Cloud (100.100.100.200), Azure's
 * WireServer (168.63.129.16); and the unspecified addresses (0.0.0.0/8, ::), which
 * connect to the local host.
 */
export const NEVER_CIDRS: readonly string[] = [
  '0.0.0.0/8',
  '169.254.169.254/32',
  '169.254.170.2/32',
  '169.254.170.23/32',
  '100.100.100.200/32',
  '168.63.129.16/32',
  '::/128',
  'fd00:ec2::254/128',
  'fd00:ec2::23/128',
];

/** Host names of metadata services (refused before any lookup, whatever they resolve to). */
export const NEVER_HOSTS: readonly string[] = [
  'metadata',
  'metadata.google.internal',
  'metadata.goog',
  'metadata.azure.internal',
  'instance-data',
  'instance-data.ec2.internal',
  'metadata.tencentyun.com',
];

const NEVER: Cidr[] = NEVER_CIDRS.map((c) => ipaddr.parseCIDR(c));
const NEVER_HOST_SET = new Set(NEVER_HOSTS);
const NAT64 = ipaddr.parseCIDR('64:ff9b::/96');
const NAT64_LOCAL = ipaddr.parseCIDR('64:ff9b:1::/48');
const SIX_TO_FOUR = ipaddr.parseCIDR('2002::/16');
const V4_COMPATIBLE = ipaddr.parseCIDR('::/96');
const V4_COMPATIBLE_RESERVED = ipaddr.parseCIDR('::/112');

/** Host name as matched: lower case, brackets and a trailing dot removed. */
export function normalHost(host: string): string {
  return host
    .trim()
    .toLowerCase()
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '');
}

function v4FromLow32(ip: ipaddr.IPv6, shift = 0): ipaddr.IPv4 {
  const p = ip.parts;
  const words = [p[6 - shift] ?? 0, p[7 - shift] ?? 0];
  return new ipaddr.IPv4([words[0]! >> 8, words[0]! & 0xff, words[1]! >> 8, words[1]! & 0xff]);
}

/**
 * The IPv4 address an IPv6 one carries and a network may translate it to: NAT64
 * (64:ff9b::/96, 64:ff9b:1::/48), 6to4 (2002::/16) and the old IPv4-compatible ::/96.
 */
export function embeddedIpv4(ip: Ip): ipaddr.IPv4 | undefined {
  if (ip.kind() !== 'ipv6') return undefined;
  const v6 = ip as ipaddr.IPv6;
  if (v6.match(NAT64) || v6.match(NAT64_LOCAL)) return v4FromLow32(v6);
  if (v6.match(SIX_TO_FOUR)) return v4FromLow32(v6, 5);
  if (v6.match(V4_COMPATIBLE) && !v6.match(V4_COMPATIBLE_RESERVED)) return v4FromLow32(v6);
  return undefined;
}

/** Whether an address is itself a never-reachable one (not counting what it embeds). */
export function isNeverAddress(ip: Ip): boolean {
  return NEVER.some(([base, bits]) => ip.kind() === base.kind() && ip.match(base, bits));
}

/** Whether a whole network lies inside one never-reachable network. */
export function isInsideNever([base, bits]: Cidr): boolean {
  return NEVER.some(
    ([n, nBits]) => base.kind() === n.kind() && bits >= nBits && base.match(n, nBits),
  );
}

/** Whether a (normalised) host name is a metadata service's. */
export function isNeverHost(host: string): boolean {
  return NEVER_HOST_SET.has(host);
}

/**
 * Why a URL could never be reached by any outbound policy, or undefined when some
 * policy could open it (a host name is only judged by its name here: what it resolves
 * to is decided at connect time). WHATWG URL parsing has already turned other spellings
 * of an IPv4 address (`2852039166`, `0xa9.0xfe.0xa9.0xfe`) into the dotted quad.
 */
export function neverReachable(url: string): string | undefined {
  let host: string;
  try {
    host = normalHost(new URL(url).hostname);
  } catch {
    return undefined; // not a URL: the schema's concern
  }
  if (isNeverHost(host))
    return `host ${host} is a cloud metadata service, which is never reachable`;
  const ip = parseIp(host);
  if (!ip) return undefined;
  const inner = embeddedIpv4(ip);
  const never = isNeverAddress(ip) ? ip : inner && isNeverAddress(inner) ? inner : undefined;
  if (!never) return undefined;
  // 0.0.0.0/8 (and ::, or what carries them) connects to the local host.
  const unspecified =
    never.kind() === 'ipv4'
      ? (never as ipaddr.IPv4).octets[0] === 0
      : never.range() === 'unspecified';
  const what = unspecified ? 'the unspecified address' : 'a cloud metadata endpoint';
  return `address ${ip.toString()} is ${what}, which is never reachable`;
}
