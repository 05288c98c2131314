// The outbound address guard (SSRF defence, G1) shared by http nodes and callbacks; it
// enforces the outbound policy (policy.ts: classes, rules, levels).
//
// - Only the allowed schemes (http nodes: http/https; callbacks: https only, unless the
//   cluster policy names the destination itself).
// - Literal IPs in URLs are checked (WHATWG URL parsing turns `2130706433` and
//   `0x7f000001` into `127.0.0.1`, and `[::ffff:127.0.0.1]` into `[::ffff:7f00:1]`,
//   which is checked as 127.0.0.1).
// - Host names are checked at connect time: each scope's undici Agent resolves through
//   a guarded `lookup` that refuses when ANY resolved address is refused, so a DNS
//   answer cannot swap in a private address after validation (rebinding). Each policy
//   scope has an Agent of its own: a pooled connection made under one workflow's
//   policy is never reused by a workflow whose policy would refuse it.
// - Redirects are never followed by the callers (undici `request` does not follow).
import dns, { type LookupAddress } from 'node:dns';
import net from 'node:net';
import { Agent, buildConnector } from 'undici';
import {
  addressClass,
  clusterNames,
  normalHost,
  parseIp,
  parseRules,
  refuseAddress,
  refuseHost,
  type Destination,
  type OutboundRules,
  type ParsedRules,
} from './policy.ts';

export type { OutboundRules } from './policy.ts';

/** A `dns.lookup`-compatible function (injection point for tests: a rebinding stub). */
export type LookupFn = (
  hostname: string,
  options: dns.LookupAllOptions,
  callback: (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

export interface OutboundGuardOptions {
  /**
   * The cluster policy's allow entries: destinations permitted although not public.
   * CIDRs or IPs (`10.0.0.0/8`, `127.0.0.1`, `::1/128`), host names (`api.internal`),
   * wildcard suffixes (`*.svc.cluster.local`) and `host:port` / `ip:port`
   * (`receiver.test:8443`, `127.0.0.1:9000`, `[::1]:9000`). Names (plain, wildcard or
   * with a port) open private addresses only; loopback and link-local need an address
   * entry. An entry that names the destination itself also lifts the https-only rule of
   * callbacks.
   */
  allow?: string[];
  /** The cluster policy's deny entries (same forms): refused even when public. */
  deny?: string[];
  /** Narrowing policies per namespace (only take away; see policy.ts). */
  namespaces?: Record<string, OutboundRules>;
  /** Resolver used at connect time; default `dns.lookup`. */
  lookup?: LookupFn;
  /** Connect timeout in ms; default 10 000. */
  connectTimeoutMs?: number;
  /** Policy scopes (each with its own connection pool) kept at most. Default 1024. */
  maxScopes?: number;
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

/**
 * Why an address may not be reached with no policy at all (its ipaddr.js range, e.g.
 * `loopback`, `private`, `linkLocal`, `metadata`, `rfc6052` for NAT64), or undefined
 * for public unicast.
 */
export function blockedRange(address: string): string | undefined {
  const ip = parseIp(address);
  if (!ip) return 'invalid';
  const { cls, range } = addressClass(ip);
  return cls === 'public' ? undefined : range;
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
  /** The cluster policy names the destination itself (http allowed for callbacks). */
  hostAllowed: boolean;
}

/** What sends outbound requests needs: a check before, and the dispatcher to send with. */
export interface OutboundTarget {
  /** Validates a URL before any connection; throws OutboundRefusedError. */
  check(target: string, options: CheckOptions): CheckedUrl;
  /** The undici dispatcher to send a checked request with. */
  dispatcher(checked: CheckedUrl): Agent;
}

/** A narrowing level: its name in refusals, and its parsed rules. */
interface Level {
  name: string;
  rules: ParsedRules;
}

/** What a workflow is, to the guard: where it lives and its own outbound rules. */
export interface WorkflowPolicySource {
  namespace: string;
  spec: { outbound?: OutboundRules };
}

/** The cluster policy narrowed by some levels, with its own connection pool. */
export class OutboundScope implements OutboundTarget {
  readonly #cluster: ParsedRules;
  readonly #levels: Level[];
  /** Set when a level's rules do not parse: every request is refused (fail closed). */
  readonly #broken: string | undefined;
  readonly #agent: Agent;

  constructor(
    cluster: ParsedRules,
    levels: Level[],
    broken: string | undefined,
    lookup: LookupFn,
    timeout: number,
  ) {
    this.#cluster = cluster;
    this.#levels = levels;
    this.#broken = broken;
    // One connector per port: host:port entries are matched on the port being
    // connected to, which node's lookup is not told.
    const connectors = new Map<string, buildConnector.connector>();
    const connect: buildConnector.connector = (opts, callback) => {
      const port = String(opts.port || (opts.protocol === 'https:' ? 443 : 80));
      let connector = connectors.get(port);
      if (!connector) {
        connector = buildConnector({ timeout, lookup: this.#guardedLookup(lookup, port) });
        connectors.set(port, connector);
      }
      connector(opts, callback);
    };
    this.#agent = new Agent({ connect });
  }

  /** Refusal reason for reaching `address` as `host:port`, or undefined when allowed. */
  refuseAddress(address: string, host = address, port = '443'): string | undefined {
    return refuseAddress(this.#cluster, this.#levels, { host: normalHost(host), port }, address);
  }

  check(target: string, options: CheckOptions): CheckedUrl {
    if (this.#broken) throw new OutboundRefusedError(this.#broken);
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      throw new OutboundRefusedError(`invalid URL '${shownUrl(target)}'`);
    }
    if (!['http:', 'https:'].includes(url.protocol)) {
      throw new OutboundRefusedError(`scheme ${url.protocol} not allowed`);
    }
    const d: Destination = { host: normalHost(url.hostname), port: defaultPort(url) };
    const hostAllowed = clusterNames(this.#cluster, d);
    if (!options.protocols.includes(url.protocol) && !hostAllowed) {
      throw new OutboundRefusedError(
        `scheme ${url.protocol} not allowed (allowed: ${options.protocols.join(', ')})`,
      );
    }
    if (url.username || url.password) {
      throw new OutboundRefusedError('credentials in the URL are not allowed');
    }
    const hostRefusal = refuseHost(this.#levelsWithCluster(), d);
    if (hostRefusal) throw new OutboundRefusedError(hostRefusal);
    if (net.isIP(d.host) !== 0) {
      const reason = refuseAddress(this.#cluster, this.#levels, d, d.host);
      if (reason) throw new OutboundRefusedError(reason);
    }
    return { url, hostAllowed };
  }

  dispatcher(_checked: CheckedUrl): Agent {
    return this.#agent;
  }

  async close(): Promise<void> {
    await this.#agent.close();
  }

  #levelsWithCluster(): Level[] {
    return [{ name: 'cluster outbound policy', rules: this.#cluster }, ...this.#levels];
  }

  #guardedLookup(lookup: LookupFn, port: string): net.LookupFunction {
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
        const d: Destination = { host: normalHost(hostname), port };
        for (const entry of addresses) {
          const reason = refuseAddress(this.#cluster, this.#levels, d, entry.address);
          if (reason) {
            callback(
              new OutboundRefusedError(
                `${hostname} resolves to a refused address ${entry.address}: ${reason}`,
              ),
              [],
            );
            return;
          }
        }
        const first = addresses[0];
        if (!first) {
          callback(Object.assign(new Error(`${hostname}: no address`), { code: 'ENOTFOUND' }), []);
          return;
        }
        if (options.all) callback(null, addresses);
        else callback(null, first.address, first.family);
      });
    };
    return guarded;
  }
}

/**
 * The guard: the cluster policy, the per-namespace narrowings, and a bounded cache of
 * scopes (one per distinct effective policy, each with its own connection pool). Its
 * own check/dispatcher apply the cluster policy alone. Close it when done.
 */
export class OutboundGuard implements OutboundTarget {
  readonly #cluster: ParsedRules;
  readonly #namespaces: Map<string, { rules: OutboundRules; parsed: ParsedRules }>;
  readonly #lookup: LookupFn;
  readonly #timeout: number;
  readonly #maxScopes: number;
  readonly #scopes = new Map<string, OutboundScope>();
  readonly #root: OutboundScope;

  /** Throws an Error listing every bad entry of the cluster or namespace policies. */
  constructor(options: OutboundGuardOptions = {}) {
    this.#cluster = parseRules({ allow: options.allow ?? [], deny: options.deny ?? [] }, false);
    this.#namespaces = new Map();
    for (const [namespace, rules] of Object.entries(options.namespaces ?? {})) {
      try {
        this.#namespaces.set(namespace, { rules, parsed: parseRules(rules, true) });
      } catch (error) {
        throw new Error(`namespace ${namespace}: ${(error as Error).message}`, { cause: error });
      }
    }
    this.#lookup = options.lookup ?? dns.lookup;
    this.#timeout = options.connectTimeoutMs ?? 10_000;
    this.#maxScopes = Math.max(1, options.maxScopes ?? 1024);
    this.#root = new OutboundScope(this.#cluster, [], undefined, this.#lookup, this.#timeout);
  }

  /** Refusal reason for an IP under the cluster policy, or undefined when it may be reached. */
  refuseAddress(address: string): string | undefined {
    return this.#root.refuseAddress(address);
  }

  check(target: string, options: CheckOptions): CheckedUrl {
    return this.#root.check(target, options);
  }

  dispatcher(checked: CheckedUrl): Agent {
    return this.#root.dispatcher(checked);
  }

  /**
   * The scope a workflow's requests and callbacks go out in: the cluster policy, its
   * namespace's narrowing (if any), its own `spec.outbound` (if any).
   */
  forWorkflow(workflow: WorkflowPolicySource): OutboundScope {
    const ns = this.#namespaces.get(workflow.namespace);
    const own = workflow.spec.outbound;
    const hasOwn = (own?.allow?.length ?? 0) + (own?.deny?.length ?? 0) > 0;
    if (!ns && !hasOwn) return this.#root;
    const key = JSON.stringify([ns ? workflow.namespace : '', hasOwn ? own : null]);
    const cached = this.#scopes.get(key);
    if (cached) {
      // Most recently used last: the first entry is the one evicted.
      this.#scopes.delete(key);
      this.#scopes.set(key, cached);
      return cached;
    }
    const levels: Level[] = [];
    if (ns)
      levels.push({ name: `outbound policy of namespace ${workflow.namespace}`, rules: ns.parsed });
    let broken: string | undefined;
    if (hasOwn) {
      try {
        levels.push({ name: "workflow's outbound policy", rules: parseRules(own, true) });
      } catch (error) {
        broken = `the workflow's spec.outbound is invalid (${(error as Error).message})`;
      }
    }
    const scope = new OutboundScope(this.#cluster, levels, broken, this.#lookup, this.#timeout);
    this.#scopes.set(key, scope);
    if (this.#scopes.size > this.#maxScopes) {
      const [oldest, evicted] = this.#scopes.entries().next().value as [string, OutboundScope];
      this.#scopes.delete(oldest);
      // Graceful: requests under way on its connections finish first.
      void evicted.close().catch(() => {});
    }
    return scope;
  }

  /** Scopes cached now (tests). */
  get scopeCount(): number {
    return this.#scopes.size;
  }

  async close(): Promise<void> {
    const scopes = [this.#root, ...this.#scopes.values()];
    this.#scopes.clear();
    await Promise.all(scopes.map((s) => s.close()));
  }
}

/**
 * A URL as a refusal or a failure may quote it (the reason reaches the record, the log,
 * the trace, a callback's body and a waiting caller's problem, whoever that caller is):
 * its scheme and host only, `/…` for a path, without what may carry a secret: the path
 * (chat and bot webhooks put their token there: `/bot<token>/sendMessage`), query,
 * fragment and user info; at most 120 characters. The node id beside it, and the URL in
 * the Workflow, say which call it was.
 */
export function shownUrl(target: string): string {
  const shown = target.split(/[?#]/, 1)[0] as string;
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(shown)?.[0] ?? '';
  const rest = shown.slice(scheme.length);
  const slash = rest.indexOf('/');
  let authority = slash === -1 ? rest : rest.slice(0, slash);
  const at = authority.lastIndexOf('@');
  if (at !== -1) authority = `…@${authority.slice(at + 1)}`;
  const path = slash === -1 ? '' : rest.slice(slash);
  const quoted = scheme + authority + (path.length > 1 ? '/…' : path);
  return quoted.length > 120 ? `${quoted.slice(0, 120)}…` : quoted;
}
