// The outbound address guard (SSRF defence, G1) shared by http nodes and callbacks.
//
// - Only the allowed schemes (http nodes: http/https; callbacks: https only).
// - Literal IPs in URLs are checked (WHATWG URL parsing turns `2130706433` and
//   `0x7f000001` into `127.0.0.1`, and `[::ffff:127.0.0.1]` into `[::ffff:7f00:1]`).
// - Host names are checked at connect time: the undici Agent resolves through a guarded
//   `lookup` that refuses when ANY resolved address is not public unicast, so a DNS
//   answer cannot swap in a private address after validation (rebinding).
// - Redirects are never followed by the callers (undici `request` does not follow).
// - An allow-list of CIDRs and/or `host:port` entries permits local receivers (dev, tests).
import dns, { type LookupAddress } from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import { Agent } from 'undici';

/** A `dns.lookup`-compatible function (injection point for tests: a rebinding stub). */
export type LookupFn = (
  hostname: string,
  options: dns.LookupAllOptions,
  callback: (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

export interface OutboundGuardOptions {
  /**
   * Destinations permitted although not public: CIDRs (`127.0.0.1/32`, `10.0.0.0/8`,
   * `::1/128`; a bare IP means /32 or /128) and/or `host:port` (`localhost:8443`,
   * `127.0.0.1:9000`, `[::1]:9000`). A `host:port` entry also lifts the https-only rule
   * of callbacks for that destination.
   */
  allow?: string[];
  /** Resolver used at connect time; default `dns.lookup`. */
  lookup?: LookupFn;
  /** Connect timeout in ms; default 10 000. */
  connectTimeoutMs?: number;
}

export const OUTBOUND_REFUSED = 'HG_OUTBOUND_REFUSED';

/** A destination the guard refused. `code` is always HG_OUTBOUND_REFUSED. */
export class OutboundRefusedError extends Error {
  readonly code = OUTBOUND_REFUSED;
  constructor(message: string) {
    super(message);
    this.name = 'OutboundRefusedError';
  }
}

/** Finds an OutboundRefusedError in an error's cause chain (undici wraps connect errors). */
export function findRefusal(error: unknown): OutboundRefusedError | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && current; depth++) {
    if (current instanceof OutboundRefusedError) return current;
    if (typeof current === 'object' && current !== null && 'code' in current) {
      const c = current as { code?: unknown; message?: unknown };
      if (c.code === OUTBOUND_REFUSED) return new OutboundRefusedError(String(c.message));
    }
    if (current instanceof AggregateError) {
      for (const inner of current.errors) {
        const found = findRefusal(inner);
        if (found) return found;
      }
    }
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

/**
 * Why an address may not be reached (its ipaddr.js range, e.g. `loopback`, `private`,
 * `linkLocal`, `ipv4Mapped`, `rfc6052` for NAT64), or undefined for public unicast.
 */
export function blockedRange(address: string): string | undefined {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.parse(address.replace(/^\[|\]$/g, ''));
  } catch {
    return 'invalid';
  }
  const range = parsed.range();
  if (range !== 'unicast') return range;
  if (parsed.kind() === 'ipv6' && !parsed.match(GLOBAL_UNICAST_V6)) return 'non-global-ipv6';
  return undefined;
}

interface AllowList {
  cidrs: [ipaddr.IPv4 | ipaddr.IPv6, number][];
  hostPorts: Set<string>;
}

function parseAllowList(entries: string[]): AllowList {
  const list: AllowList = { cidrs: [], hostPorts: new Set() };
  for (const raw of entries) {
    const entry = raw.trim().toLowerCase();
    if (entry.includes('/')) {
      list.cidrs.push(ipaddr.parseCIDR(entry));
    } else if (ipaddr.isValid(entry)) {
      const ip = ipaddr.parse(entry);
      list.cidrs.push([ip, ip.kind() === 'ipv4' ? 32 : 128]);
    } else {
      const url = new URL(`http://${entry}`);
      if (!url.port)
        throw new Error(`allow-list entry '${raw}' needs a port (host:port) or a CIDR`);
      list.hostPorts.add(`${url.hostname}:${url.port}`);
    }
  }
  return list;
}

function defaultPort(url: URL): string {
  return url.port || (url.protocol === 'https:' ? '443' : '80');
}

export interface CheckOptions {
  /** Allowed schemes, e.g. `['https:']`. */
  protocols: string[];
}

/** A validated destination. */
export interface CheckedUrl {
  url: URL;
  /** True when a `host:port` allow-list entry covers it (DNS answers are then trusted). */
  hostAllowed: boolean;
}

/**
 * Guards outbound requests. One instance holds two undici Agents: a strict one whose
 * DNS lookup refuses non-public addresses, and one for allow-listed `host:port`
 * destinations. Close it when done.
 */
export class OutboundGuard {
  readonly #allow: AllowList;
  readonly #strict: Agent;
  readonly #trusted: Agent;

  constructor(options: OutboundGuardOptions = {}) {
    this.#allow = parseAllowList(options.allow ?? []);
    const lookup = options.lookup ?? dns.lookup;
    const timeout = options.connectTimeoutMs ?? 10_000;
    this.#strict = new Agent({
      connect: { timeout, lookup: this.#guardedLookup(lookup) },
    });
    this.#trusted = new Agent({
      connect: { timeout, lookup: lookup as unknown as net.LookupFunction },
    });
  }

  /** Whether an IP is permitted by an allow-list CIDR. */
  ipAllowed(address: string): boolean {
    let ip: ipaddr.IPv4 | ipaddr.IPv6;
    try {
      ip = ipaddr.process(address.replace(/^\[|\]$/g, ''));
    } catch {
      return false;
    }
    return this.#allow.cidrs.some(([net, bits]) => ip.kind() === net.kind() && ip.match(net, bits));
  }

  /** Refusal reason for an IP, or undefined when it may be reached. */
  refuseAddress(address: string): string | undefined {
    const range = blockedRange(address);
    if (range === undefined || this.ipAllowed(address)) return undefined;
    return `address ${address} is not public (${range})`;
  }

  /** Validates a URL before any connection; throws OutboundRefusedError. */
  check(target: string, options: CheckOptions): CheckedUrl {
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      throw new OutboundRefusedError(`invalid URL '${target}'`);
    }
    const hostAllowed = this.#allow.hostPorts.has(`${url.hostname}:${defaultPort(url)}`);
    if (!['http:', 'https:'].includes(url.protocol)) {
      throw new OutboundRefusedError(`scheme ${url.protocol} not allowed`);
    }
    if (!options.protocols.includes(url.protocol) && !hostAllowed) {
      throw new OutboundRefusedError(
        `scheme ${url.protocol} not allowed (allowed: ${options.protocols.join(', ')})`,
      );
    }
    if (url.username || url.password) {
      throw new OutboundRefusedError('credentials in the URL are not allowed');
    }
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (!hostAllowed && net.isIP(host) !== 0) {
      const reason = this.refuseAddress(host);
      if (reason) throw new OutboundRefusedError(reason);
    }
    return { url, hostAllowed };
  }

  /** The undici dispatcher to send a checked request with. */
  dispatcher(checked: CheckedUrl): Agent {
    return checked.hostAllowed ? this.#trusted : this.#strict;
  }

  async close(): Promise<void> {
    await Promise.all([this.#strict.close(), this.#trusted.close()]);
  }

  #guardedLookup(lookup: LookupFn): net.LookupFunction {
    const guarded = (
      hostname: string,
      options: dns.LookupOptions,
      callback: (
        error: NodeJS.ErrnoException | null,
        address: string | LookupAddress[],
        family?: number,
      ) => void,
    ): void => {
      lookup(hostname, { ...options, all: true }, (error, addresses) => {
        if (error) {
          callback(error, []);
          return;
        }
        const list = addresses;
        for (const entry of list) {
          const reason = this.refuseAddress(entry.address);
          if (reason) {
            callback(new OutboundRefusedError(`${hostname} resolves to a refused ${reason}`), []);
            return;
          }
        }
        const first = list[0];
        if (!first) {
          callback(Object.assign(new Error(`${hostname}: no address`), { code: 'ENOTFOUND' }), []);
          return;
        }
        if (options.all) callback(null, list);
        else callback(null, first.address, first.family);
      });
    };
    return guarded;
  }
}
