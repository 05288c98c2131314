// Redis adapter of the idempotency store (G13): shared by every gateway replica, so a
// retry with the same Idempotency-Key is recognised wherever it lands. Each operation
// is one atomic Lua script (registered once with defineCommand): the claim is a SET
// with PX only when the key is free, so of many concurrent begins exactly one wins.
import type { RedisClient } from '../../../api/records/redis-client.ts';
import type { BeginResult, IdempotencyRecord, IdempotencyStore, ResumeHint } from './store.ts';

// The entry: {f: fingerprint, t: ttl ms, u: the claim's lease end (ms, Redis' clock;
// 0 once given back with a hint; none in a claim written before leases: in progress
// for its whole TTL, as it was), r: the answer as JSON text, once complete; o: the
// resume hint as JSON text}. Answer and hint stay text so Lua's cjson cannot change
// them (it turns [] into {}).
const BEGIN = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local v = redis.call('GET', KEYS[1])
if v then
  local e = cjson.decode(v)
  if e.f ~= ARGV[1] then return {'mismatch'} end
  if e.r then return {'replay', e.r} end
  if e.u == nil or e.u > now then return {'in-progress'} end
  e.u = now + tonumber(ARGV[3])
  redis.call('SET', KEYS[1], cjson.encode(e), 'KEEPTTL')
  if e.o then return {'new', e.o} end
  return {'new'}
end
local entry = {f = ARGV[1], t = tonumber(ARGV[2]), u = now + tonumber(ARGV[3])}
redis.call('SET', KEYS[1], cjson.encode(entry), 'PX', ARGV[2])
return {'new'}`;

const COMPLETE = `
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local e = cjson.decode(v)
e.r = ARGV[1]
local ttl = tonumber(ARGV[2])
if not ttl or ttl <= 0 then ttl = e.t end
redis.call('SET', KEYS[1], cjson.encode(e), 'PX', ttl)
return 1`;

const ABANDON = `
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local e = cjson.decode(v)
if e.r then return 0 end
if ARGV[1] and ARGV[1] ~= '' then
  e.o = ARGV[1]
  e.u = 0
  redis.call('SET', KEYS[1], cjson.encode(e), 'KEEPTTL')
  return 1
end
redis.call('DEL', KEYS[1])
return 1`;

/** The commands defineCommand adds to the client (ioredis types them per call). */
interface IdempotencyCommands {
  hookgateIdemBegin(
    key: string,
    fingerprint: string,
    ttlMs: number,
    leaseMs: number,
  ): Promise<string[]>;
  hookgateIdemComplete(key: string, record: string, ttlMs: number): Promise<number>;
  hookgateIdemAbandon(key: string, resume: string): Promise<number>;
}

export class RedisIdempotencyStore<R = IdempotencyRecord> implements IdempotencyStore<R> {
  readonly #redis: IdempotencyCommands;
  readonly #prefix: string;

  constructor(options: { redis: RedisClient; keyPrefix?: string }) {
    const redis = options.redis;
    redis.defineCommand('hookgateIdemBegin', { numberOfKeys: 1, lua: BEGIN });
    redis.defineCommand('hookgateIdemComplete', { numberOfKeys: 1, lua: COMPLETE });
    redis.defineCommand('hookgateIdemAbandon', { numberOfKeys: 1, lua: ABANDON });
    // defineCommand adds methods ioredis cannot type; the interface above names them.
    this.#redis = redis as unknown as IdempotencyCommands;
    this.#prefix = options.keyPrefix ?? 'hookgate:idem:';
  }

  async begin(
    key: string,
    fingerprint: string,
    ttlMs: number,
    leaseMs = ttlMs,
  ): Promise<BeginResult<R>> {
    const [state, record] = await this.#redis.hookgateIdemBegin(
      this.#prefix + key,
      fingerprint,
      Math.max(1, Math.round(ttlMs)),
      Math.max(1, Math.round(leaseMs)),
    );
    if (state === 'replay') return { state, record: JSON.parse(record ?? 'null') as R };
    if (state === 'new' && record) return { state, resume: JSON.parse(record) as ResumeHint };
    if (state === 'new' || state === 'in-progress' || state === 'mismatch') return { state };
    throw new Error(`unexpected idempotency state ${String(state)}`);
  }

  async complete(key: string, record: R, ttlMs?: number): Promise<void> {
    await this.#redis.hookgateIdemComplete(
      this.#prefix + key,
      JSON.stringify(record),
      Math.round(ttlMs ?? 0),
    );
  }

  async abandon(key: string, resume?: ResumeHint): Promise<void> {
    // An empty hint is none (the script deletes the claim).
    await this.#redis.hookgateIdemAbandon(this.#prefix + key, resume ? JSON.stringify(resume) : '');
  }
}
