// Redis adapter of the gateway reports, sized for many routes and a few gateways:
//
//   hookgate:{gateways}        sorted set: gateway id → expiry (ms, Redis's TIME)
//   hookgate:{gateways}:<id>   hash: route key → generation (`<n>`, or `<n>:no-workflow`
//                              while its workflow is not in the table), and `:revision`; its TTL
//                              is the report's, so a dead gateway's hash goes too
//   hookgate:gateways:changed  channel: a JSON GatewayChange after each report that
//                              changed what is served, and when a gateway joins or leaves
//
// A gateway writes only what changed since its last report (one Lua script: apply,
// extend the expiry, publish) and refreshes the expiry every third of its TTL. The
// operator asks per route (one script: the live ids and each one's HGET), so a check
// costs one round trip whatever the number of routes. Expiry uses Redis's clock, so
// the processes' clocks do not matter. The keys share the `{gateways}` hash tag: the
// scripts touch several of them, which Redis Cluster allows within one slot.
import { duplicateClient, type RedisClient } from './redis-client.ts';
import {
  changeOf,
  type GatewayChange,
  type GatewayChangeListener,
  type GatewayReport,
  type GatewayStore,
  type RouteServed,
  type ServedRoute,
} from './gateways.ts';

export const GATEWAY_KEYS = {
  members: 'hookgate:{gateways}',
  /** Prefix of each gateway's hash: `hookgate:{gateways}:<id>`. */
  routes: 'hookgate:{gateways}:',
  channel: 'hookgate:gateways:changed',
} as const;

const NO_WORKFLOW = ':no-workflow';

/** The field of a gateway's hash that holds its revision (route keys always hold a `/`). */
const REVISION_FIELD = ':revision';

const NOW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

// KEYS: members, this gateway's hash. ARGV: id, ttl ms, full (1/0), revision, channel,
// message when it joined or reported in full, message for a change of routes ('' for
// none), then pairs of route key and generation ('' when dropped). Returns 1, or 0
// when a partial report finds no live earlier one.
const REPORT = `${NOW}
local ttl = tonumber(ARGV[2])
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
local joined = (not score) or tonumber(score) <= now or redis.call('EXISTS', KEYS[2]) == 0
if joined and ARGV[3] ~= '1' then return 0 end
if ARGV[3] == '1' then redis.call('DEL', KEYS[2]) end
for i = 8, #ARGV, 2 do
  if ARGV[i + 1] == '' then redis.call('HDEL', KEYS[2], ARGV[i])
  else redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
end
redis.call('HSET', KEYS[2], '${REVISION_FIELD}', ARGV[4])
redis.call('PEXPIRE', KEYS[2], ttl)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if joined or ARGV[3] == '1' then redis.call('PUBLISH', ARGV[5], ARGV[6])
elseif ARGV[7] ~= '' then redis.call('PUBLISH', ARGV[5], ARGV[7]) end
return 1`;

// KEYS: members, this gateway's hash. ARGV: id, ttl ms. Returns 1, or 0 when there is
// no live report to extend.
const REFRESH = `${NOW}
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if (not score) or tonumber(score) <= now or redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[2]))
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
return 1`;

// KEYS: members, this gateway's hash. ARGV: id, channel, message.
const REMOVE = `
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
if removed > 0 then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
return removed`;

// KEYS: members. ARGV: hash prefix, route key ('' for the ids only). Returns id,
// generation ('' when not served) pairs of the live gateways.
const SERVED = `${NOW}
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], string.format('(%d', now), '+inf')
local out = {}
for _, id in ipairs(ids) do
  out[#out + 1] = id
  if ARGV[2] == '' then out[#out + 1] = ''
  else out[#out + 1] = redis.call('HGET', ARGV[1] .. id, ARGV[2]) or '' end
end
return out`;

/** The commands defineCommand adds to the client (ioredis cannot type them). */
interface GatewayCommands {
  hookgateGatewayReport(members: string, hash: string, ...args: string[]): Promise<number>;
  hookgateGatewayRefresh(members: string, hash: string, id: string, ttl: string): Promise<number>;
  hookgateGatewayRemove(
    members: string,
    hash: string,
    id: string,
    channel: string,
    message: string,
  ): Promise<number>;
  hookgateGatewayServed(members: string, prefix: string, routeKey: string): Promise<string[]>;
}

export interface RedisGatewayStoreOptions {
  redis: RedisClient;
  /** A connection for the change feed; `redis.duplicate()` on the first subscribe when omitted. */
  subscriber?: RedisClient;
  /** How often the operator side looks for expired gateways. Default 1000 ms. */
  pollMs?: number;
}

const GATEWAYS_CHANGED = JSON.stringify({ kind: 'gateways' } satisfies GatewayChange);

export class RedisGatewayStore implements GatewayStore {
  readonly #redis: RedisClient;
  readonly #commands: GatewayCommands;
  readonly #pollMs: number;
  readonly #listeners = new Set<GatewayChangeListener>();
  #subscriber: RedisClient | undefined;
  #ownSubscriber = false;
  #subscribed: Promise<unknown> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #polling = false;
  /** The live ids as last seen by the poll; undefined before the first poll. */
  #members: string | undefined;

  constructor(options: RedisGatewayStoreOptions) {
    const { redis } = options;
    redis.defineCommand('hookgateGatewayReport', { numberOfKeys: 2, lua: REPORT });
    redis.defineCommand('hookgateGatewayRefresh', { numberOfKeys: 2, lua: REFRESH });
    redis.defineCommand('hookgateGatewayRemove', { numberOfKeys: 2, lua: REMOVE });
    redis.defineCommand('hookgateGatewayServed', { numberOfKeys: 1, lua: SERVED });
    this.#redis = redis;
    // defineCommand adds methods ioredis cannot type; the interface above names them.
    this.#commands = redis as unknown as GatewayCommands;
    this.#subscriber = options.subscriber;
    this.#pollMs = options.pollMs ?? 1000;
  }

  async report(report: GatewayReport): Promise<boolean> {
    const change = changeOf(report, false);
    const pairs: string[] = [];
    for (const [key, served] of report.serve) pairs.push(key, encode(served));
    if (!report.full) for (const key of report.drop) pairs.push(key, '');
    const applied = await this.#commands.hookgateGatewayReport(
      GATEWAY_KEYS.members,
      GATEWAY_KEYS.routes + report.gateway,
      report.gateway,
      String(report.ttlMs),
      report.full ? '1' : '0',
      String(report.revision),
      GATEWAY_KEYS.channel,
      GATEWAYS_CHANGED,
      change ? JSON.stringify(change) : '',
      ...pairs,
    );
    return applied === 1;
  }

  async refresh(gateway: string, ttlMs: number): Promise<boolean> {
    const extended = await this.#commands.hookgateGatewayRefresh(
      GATEWAY_KEYS.members,
      GATEWAY_KEYS.routes + gateway,
      gateway,
      String(ttlMs),
    );
    return extended === 1;
  }

  async remove(gateway: string): Promise<void> {
    await this.#commands.hookgateGatewayRemove(
      GATEWAY_KEYS.members,
      GATEWAY_KEYS.routes + gateway,
      gateway,
      GATEWAY_KEYS.channel,
      GATEWAYS_CHANGED,
    );
  }

  async served(routeKey: string): Promise<RouteServed[]> {
    const flat = await this.#commands.hookgateGatewayServed(
      GATEWAY_KEYS.members,
      GATEWAY_KEYS.routes,
      routeKey,
    );
    const served: RouteServed[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      served.push({ gateway: flat[i] as string, route: decode(flat[i + 1]) });
    }
    return served.sort((a, b) => (a.gateway < b.gateway ? -1 : 1));
  }

  async live(): Promise<string[]> {
    const flat = await this.#commands.hookgateGatewayServed(
      GATEWAY_KEYS.members,
      GATEWAY_KEYS.routes,
      '',
    );
    return flat.filter((_v, i) => i % 2 === 0).sort();
  }

  subscribe(listener: GatewayChangeListener): () => void {
    this.#listeners.add(listener);
    if (!this.#subscribed) {
      if (!this.#subscriber) {
        this.#subscriber = duplicateClient(this.#redis);
        this.#ownSubscriber = true;
      }
      const sub = this.#subscriber;
      sub.on('message', (channel: string, message: string) => {
        if (channel !== GATEWAY_KEYS.channel) return;
        const change = parseChange(message);
        if (change) this.#notify(change);
      });
      // After a reconnect, messages may have been missed (and Redis may have restarted
      // empty): listeners look at everything again.
      sub.on('ready', () => this.#notify({ kind: 'resync' }));
      // Redis may be down now, or the store closed before the answer: ioredis subscribes
      // again on every reconnect, and the `ready` handler above resyncs, so a failed
      // first attempt is not an error (unhandled, it ended the process).
      this.#subscribed = sub.subscribe(GATEWAY_KEYS.channel).catch(() => undefined);
      this.#timer = setInterval(() => void this.#poll(), this.#pollMs);
      this.#timer.unref();
    }
    return () => this.#listeners.delete(listener);
  }

  /** Resolves once the change feed is live (after the first subscribe). */
  async ready(): Promise<void> {
    await this.#subscribed;
  }

  close(): void {
    clearInterval(this.#timer);
    if (this.#ownSubscriber) this.#subscriber?.disconnect();
    this.#listeners.clear();
  }

  /** An expired gateway publishes nothing: the set of live ids is compared instead. */
  async #poll(): Promise<void> {
    if (this.#polling || this.#redis.status !== 'ready') return;
    this.#polling = true;
    try {
      const members = (await this.live()).join('\n');
      const before = this.#members;
      this.#members = members;
      if (before !== undefined && before !== members) this.#notify({ kind: 'gateways' });
    } catch {
      // Redis is unavailable: the reconciles that need it report it; the next poll retries.
    } finally {
      this.#polling = false;
    }
  }

  #notify(change: GatewayChange): void {
    for (const listener of [...this.#listeners]) listener(change);
  }
}

/** A hash value: the generation, marked when the workflow is not in the table. */
function encode(served: ServedRoute): string {
  return served.workflow ? String(served.generation) : `${served.generation}${NO_WORKFLOW}`;
}

function decode(value: string | undefined): ServedRoute | undefined {
  if (!value) return undefined;
  const workflow = !value.endsWith(NO_WORKFLOW);
  const generation = Number(workflow ? value : value.slice(0, -NO_WORKFLOW.length));
  return Number.isInteger(generation) ? { generation, workflow } : undefined;
}

function parseChange(message: string): GatewayChange | undefined {
  try {
    const parsed = JSON.parse(message) as Partial<{ kind: string; keys: unknown }>;
    if (parsed.kind === 'gateways') return { kind: 'gateways' };
    if (parsed.kind === 'routes' && Array.isArray(parsed.keys)) {
      return {
        kind: 'routes',
        keys: parsed.keys.filter((k): k is string => typeof k === 'string'),
      };
    }
  } catch {
    // not ours
  }
  return undefined;
}
