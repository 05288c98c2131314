// The outbound policy: which destinations http nodes and callbacks may reach.
//
// Rules are plain strings, the same at every level (settings, chart values, the
// Workflow's `spec.outbound`, the per-namespace map):
//   - a CIDR or a bare IP            `10.20.0.0/16`, `fd00:10::/64`, `127.0.0.1`
//   - a host name                    `api.example.com` (exact, case-insensitive)
//   - a wildcard suffix              `*.svc.cluster.local` (any name below it, not itself)
//   - a host or IP with a port       `receiver.test:8443`, `127.0.0.1:9000`, `[::1]:9000`
//
// Addresses fall into four classes (addressClass):
//   never    cloud metadata endpoints and the unspecified address: refused whatever any
//            policy says (0.0.0.0 reaches the host itself; metadata hands out credentials)
//   special  loopback, link-local, multicast, reserved, documentation, NAT64 / 6to4 /
//            Teredo, IPv6 outside 2000::/3: only an operator's CIDR (or IP:port) opens one
//   private  RFC 1918, 100.64/10 (CGNAT), fc00::/7 (ULA): where cluster services live;
//            opened by an operator's CIDR or by an operator's host name entry
//   public   everything else
//
// The cluster policy (operator settings) reaches public addresses plus its `allow`
// entries, minus its `deny` entries. A narrowing policy (a namespace's, a workflow's)
// can only take away: its `deny` entries are refused, and when it lists `allow` entries
// only destinations matching one of them are reached — and only where the cluster
// policy allows them too. See docs/adr/0015-outbound-policy.md.
import ipaddr from 'ipaddr.js';

/** The plain form of a policy, as settings, chart values and the CRD carry it. */
export interface OutboundRules {
  allow?: string[];
  deny?: string[];
}

import {
  parseIp,
  parseOutboundEntry as parseEntry,
  type Cidr,
  type Ip,
  type OutboundEntry as Entry,
} from '../../../api/v1alpha1/outbound-entries.ts';

import {
  embeddedIpv4,
  isInsideNever,
  isNeverAddress,
  isNeverHost,
} from '../../../api/v1alpha1/outbound-never.ts';

export { parseIp } from '../../../api/v1alpha1/outbound-entries.ts';
export {
  embeddedIpv4,
  NEVER_CIDRS,
  NEVER_HOSTS,
  normalHost,
} from '../../../api/v1alpha1/outbound-never.ts';

/** Parsed entries of one list. */
interface Matchers {
  cidrs: Cidr[];
  /** Exact host names (lower case, no trailing dot). */
  hosts: Set<string>;
  /** Wildcard suffixes, with their leading dot (`.svc.cluster.local`). */
  suffixes: string[];
  /** `host:port` (IPv6 in brackets), lower case. */
  hostPorts: Set<string>;
  /** IP:port entries, as the address and the port. */
  ipPorts: { ip: Ip; port: string }[];
}

/** One parsed level of policy. `allowListed`: narrowing with `allow` entries. */
export interface ParsedRules {
  allow: Matchers;
  deny: Matchers;
  /** A narrowing level lists allow entries: anything else is refused. */
  restricts: boolean;
}

export type AddressClass = 'never' | 'special' | 'private' | 'public';

const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');
const PRIVATE_RANGES = new Set(['private', 'carrierGradeNat', 'uniqueLocal']);

function matchesCidr(ip: Ip, [base, bits]: Cidr): boolean {
  return ip.kind() === base.kind() && ip.match(base, bits);
}

function classOne(ip: Ip): { cls: AddressClass; range: string } {
  if (isNeverAddress(ip)) {
    return { cls: 'never', range: ip.range() === 'unspecified' ? 'unspecified' : 'metadata' };
  }
  const range = ip.range();
  if (PRIVATE_RANGES.has(range)) return { cls: 'private', range };
  if (range !== 'unicast') return { cls: 'special', range };
  if (ip.kind() === 'ipv6' && !ip.match(GLOBAL_UNICAST_V6)) {
    return { cls: 'special', range: 'non-global-ipv6' };
  }
  return { cls: 'public', range: 'unicast' };
}

const RANK: Record<AddressClass, number> = { public: 0, private: 1, special: 2, never: 3 };

/** The class of an address (the stricter of it and any IPv4 address it embeds). */
export function addressClass(ip: Ip): { cls: AddressClass; range: string } {
  const own = classOne(ip);
  const inner = embeddedIpv4(ip);
  if (!inner) return own;
  const carried = classOne(inner);
  return RANK[carried.cls] > RANK[own.cls] ? carried : own;
}

function emptyMatchers(): Matchers {
  return { cidrs: [], hosts: new Set(), suffixes: [], hostPorts: new Set(), ipPorts: [] };
}

function addEntry(into: Matchers, entry: Entry): void {
  switch (entry.kind) {
    case 'cidr':
      into.cidrs.push(entry.cidr);
      return;
    case 'host':
      into.hosts.add(entry.host);
      return;
    case 'suffix':
      into.suffixes.push(entry.suffix);
      return;
    case 'hostPort':
      into.hostPorts.add(`${entry.host}:${entry.port}`);
      return;
    case 'ipPort':
      into.ipPorts.push({ ip: entry.ip, port: entry.port });
  }
}

/** Why an allow entry can never take effect (it only names never-allowed destinations). */
function neverAllowable(entry: Entry): string | undefined {
  if ((entry.kind === 'host' || entry.kind === 'hostPort') && isNeverHost(entry.host)) {
    return 'is a metadata service, which is never allowed';
  }
  const [base, bits] =
    entry.kind === 'cidr'
      ? entry.cidr
      : entry.kind === 'ipPort'
        ? [entry.ip, entry.ip.kind() === 'ipv4' ? 32 : 128]
        : [];
  if (!base || bits === undefined) return undefined;
  // Inside one never-allowed network: nothing of it could ever be reached.
  return isInsideNever([base, bits])
    ? 'is a metadata or unspecified address, which is never allowed'
    : undefined;
}

/** Parses one level; throws an Error listing every bad entry. */
export function parseRules(rules: OutboundRules | undefined, narrowing: boolean): ParsedRules {
  const parsed: ParsedRules = {
    allow: emptyMatchers(),
    deny: emptyMatchers(),
    restricts: narrowing && (rules?.allow?.length ?? 0) > 0,
  };
  const problems: string[] = [];
  for (const [list, into] of [
    ['allow', parsed.allow],
    ['deny', parsed.deny],
  ] as const) {
    for (const raw of rules?.[list] ?? []) {
      try {
        const entry = parseEntry(raw);
        const never = !narrowing && list === 'allow' ? neverAllowable(entry) : undefined;
        if (never) problems.push(`${list}: '${raw}' ${never}`);
        else addEntry(into, entry);
      } catch (error) {
        problems.push(`${list}: ${(error as Error).message}`);
      }
    }
  }
  if (problems.length > 0) throw new Error(problems.join('; '));
  return parsed;
}

/** Every problem with a set of rules (settings, chart and Pulumi validation). */
export function rulesProblems(rules: OutboundRules, narrowing: boolean): string[] {
  try {
    parseRules(rules, narrowing);
    return [];
  } catch (error) {
    return (error as Error).message.split('; ');
  }
}

/** A destination as a policy sees it: the host name (or IP) and the port. */
export interface Destination {
  host: string;
  port: string;
}

function hostMatches(m: Matchers, d: Destination): boolean {
  if (m.hosts.has(d.host) || m.hostPorts.has(`${d.host}:${d.port}`)) return true;
  return m.suffixes.some((s) => d.host.endsWith(s));
}

function ipPortMatches(m: Matchers, ip: Ip, port: string): boolean {
  return m.ipPorts.some((e) => e.port === port && sameIp(e.ip, ip));
}

function sameIp(a: Ip, b: Ip): boolean {
  return a.kind() === b.kind() && a.toNormalizedString() === b.toNormalizedString();
}

function cidrMatches(m: Matchers, ip: Ip): boolean {
  return m.cidrs.some((c) => matchesCidr(ip, c));
}

/** Whether a host name is refused before it is resolved; the reason, or undefined. */
export function refuseHost(
  levels: readonly { name: string; rules: ParsedRules }[],
  d: Destination,
): string | undefined {
  if (isNeverHost(d.host)) return `host ${d.host} is a metadata service (never allowed)`;
  const literal = parseIp(d.host) !== undefined;
  for (const level of levels) {
    if (hostMatches(level.rules.deny, d)) return `host ${d.host} is denied by the ${level.name}`;
    // An allow list of names only: a name outside it is refused before any lookup.
    const { allow, restricts } = level.rules;
    const byAddress = allow.cidrs.length > 0 || allow.ipPorts.length > 0;
    if (restricts && !literal && !byAddress && !hostMatches(allow, d)) {
      return `host ${d.host} is not in the ${level.name}'s allow list`;
    }
  }
  return undefined;
}

/**
 * Whether `address` (what `d.host` resolved to, or the literal IP itself) may be
 * reached under the cluster policy and every narrowing level; the reason, or undefined.
 */
export function refuseAddress(
  cluster: ParsedRules,
  narrowings: readonly { name: string; rules: ParsedRules }[],
  d: Destination,
  address: string,
): string | undefined {
  const ip = parseIp(address);
  if (!ip) return `address ${address} is not an IP address`;
  const shown = ip.toString();
  const { cls, range } = addressClass(ip);
  const inner = embeddedIpv4(ip);
  const candidates = inner ? [ip, inner] : [ip];
  if (cls === 'never')
    return `address ${shown} is ${range === 'unspecified' ? 'unspecified' : 'a cloud metadata endpoint'} (never allowed)`;
  const denied = (m: Matchers) =>
    candidates.some((c) => cidrMatches(m, c)) || ipPortMatches(m, ip, d.port);
  if (denied(cluster.deny)) {
    return `address ${shown} is denied by the cluster outbound policy`;
  }
  if (cls !== 'public' && !clusterOpens(cluster, d, ip, cls)) {
    return `address ${shown} is not public (${range}) and the cluster outbound policy does not allow it`;
  }
  for (const level of narrowings) {
    if (denied(level.rules.deny)) {
      return `address ${shown} is denied by the ${level.name}`;
    }
    if (
      level.rules.restricts &&
      !hostMatches(level.rules.allow, d) &&
      !cidrMatches(level.rules.allow, ip) &&
      !ipPortMatches(level.rules.allow, ip, d.port)
    ) {
      return `${d.host === shown ? `address ${shown}` : `host ${d.host} (${shown})`} is not in the ${level.name}'s allow list`;
    }
  }
  return undefined;
}

function clusterOpens(cluster: ParsedRules, d: Destination, ip: Ip, cls: AddressClass): boolean {
  if (cidrMatches(cluster.allow, ip) || ipPortMatches(cluster.allow, ip, d.port)) return true;
  // A host name entry opens the private ranges only: loopback, link-local and the
  // rest need the operator to name the addresses (a CIDR or IP:port).
  return cls === 'private' && hostMatches(cluster.allow, d);
}

/**
 * Whether the cluster policy names this destination itself (a host, wildcard or
 * host:port entry, or a literal IP inside an allow entry): callbacks may then use http.
 */
export function clusterNames(cluster: ParsedRules, d: Destination): boolean {
  if (hostMatches(cluster.allow, d)) return true;
  const ip = parseIp(d.host);
  return (
    ip !== undefined && (cidrMatches(cluster.allow, ip) || ipPortMatches(cluster.allow, ip, d.port))
  );
}
