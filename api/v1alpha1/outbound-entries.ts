// The entries of an outbound policy (Workflow `spec.outbound`, and the runtime's
// settings): a CIDR or IP, a host name, a `*.suffix` wildcard, or host:port / ip:port /
// [ipv6]:port. Parsing only; what an entry allows is the runtime's
// (runtime/engine/outbound/policy.ts). The operator reports entries that do not parse.
import net from 'node:net';
import ipaddr from 'ipaddr.js';

export type Ip = ipaddr.IPv4 | ipaddr.IPv6;
export type Cidr = [Ip, number];

/**
 * Parses an IP in any encoding a connection would use, IPv4-mapped IPv6 made IPv4
 * (`::ffff:7f00:1` is 127.0.0.1). Undefined when it is no IP.
 */
export function parseIp(address: string): Ip | undefined {
  const bare = address.replace(/^\[|\]$/g, '');
  // ipaddr.js also reads `0x7f.1` or `2130706433` as IPv4; a connection to a string
  // like that is a host name lookup, so only what node:net calls an IP counts here.
  if (net.isIP(bare.replace(/%.*$/, '')) === 0) return undefined;
  try {
    return ipaddr.process(bare.replace(/%.*$/, ''));
  } catch {
    return undefined;
  }
}

const LABEL = '[a-z0-9_](?:[-a-z0-9_]{0,61}[a-z0-9_])?';
const HOST = new RegExp(`^${LABEL}(?:\\.${LABEL})*$`);

export type OutboundEntry =
  | { kind: 'cidr'; cidr: Cidr }
  | { kind: 'host'; host: string }
  | { kind: 'suffix'; suffix: string }
  | { kind: 'hostPort'; host: string; port: string }
  | { kind: 'ipPort'; ip: Ip; port: string };

/** Parses one entry; throws an Error naming it when it is not one. */
export function parseOutboundEntry(raw: string): OutboundEntry {
  const entry = raw.trim().toLowerCase();
  if (entry === '') throw new Error('empty entry');
  if (entry.includes('/')) return parseCidrEntry(raw, entry);
  const ip = parseIp(entry);
  if (ip) return { kind: 'cidr', cidr: [ip, ip.kind() === 'ipv4' ? 32 : 128] };
  if (entry.startsWith('*.')) {
    const suffix = entry.slice(2).replace(/\.$/, '');
    if (!HOST.test(suffix)) throw new Error(`'${raw}': a wildcard is *.<domain>`);
    return { kind: 'suffix', suffix: `.${suffix}` };
  }
  return parseHostEntry(raw, entry);
}

function parseCidrEntry(raw: string, entry: string): OutboundEntry {
  let cidr: Cidr;
  try {
    cidr = ipaddr.parseCIDR(entry);
  } catch {
    throw new Error(`'${raw}' is not a CIDR`);
  }
  // An IPv4-mapped network is the IPv4 network (connections are checked as IPv4).
  const [base, bits] = cidr;
  if (base.kind() === 'ipv6' && (base as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
    return { kind: 'cidr', cidr: [(base as ipaddr.IPv6).toIPv4Address(), bits - 96] };
  }
  return { kind: 'cidr', cidr };
}

/** `host`, `host:port`, `ip:port`, `[ipv6]:port`. */
function parseHostEntry(raw: string, entry: string): OutboundEntry {
  const m =
    /^\[([0-9a-f:.]+)\](?::(\d{1,5}))?$/.exec(entry) ?? /^([^:[\]]+)(?::(\d{1,5}))?$/.exec(entry);
  if (!m) throw new Error(`'${raw}' is not a CIDR, IP, host name or host:port`);
  const host = (m[1] ?? '').replace(/\.$/, '');
  const port = m[2];
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65535)) {
    throw new Error(`'${raw}': port out of range`);
  }
  const hostIp = parseIp(host);
  const last = host.split('.').pop() ?? '';
  // WHATWG URL reads a name ending in a number (`2130706433`, `0x7f.1`) as IPv4: such
  // a name would never be matched, so it is refused rather than guessed at.
  if (!hostIp && (!HOST.test(host) || /^(0x[0-9a-f]*|[0-9]+)$/.test(last))) {
    throw new Error(`'${raw}' is not a valid host name`);
  }
  if (port === undefined) {
    return hostIp
      ? { kind: 'cidr', cidr: [hostIp, hostIp.kind() === 'ipv4' ? 32 : 128] }
      : { kind: 'host', host };
  }
  return hostIp ? { kind: 'ipPort', ip: hostIp, port } : { kind: 'hostPort', host, port };
}
