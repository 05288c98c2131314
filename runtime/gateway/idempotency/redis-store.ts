// Redis adapter of the idempotency store (G13): shared by every gateway replica, so a
// retry with the same Idempotency-Key is recognised wherever it lands. Each operation
// is one atomic Lua script (registered once with defineCommand): the claim is a SET
// with PX only when the key is free, so of many concurrent begins exactly one wins.
// Complete and abandon compare the claim's owner id before they write (a
// compare-and-set / compare-and-delete in the script). The hint a request claims with
// (the execution it will start) is written by the claim script itself: no command more.
import { randomBytes } from 'node:crypto';
import type { RedisClient } from '../../../api/records/redis-client.ts';
import type { BeginResult, IdempotencyRecord, IdempotencyStore, ResumeHint } from './store.ts';

// The entry: {f: fingerprint, t: ttl ms, u: the claim's lease end (ms, Redis' clock;
// 0 once given back with a hint; none in a claim written before leases: in progress
// for its whole TTL, as it was), c: the owner id of the claim in progress (none once
// answered or given back, nor in a claim written before owners), r: the answer as JSON
// text, once complete; o: the resume hint as JSON text, from the claim (ARGV[5] of a
// begin that took it without one) or its give-back, dropped once answered}. Answer and
// hint stay text so Lua's cjson cannot change them (it turns [] into {}).
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
  e.c = ARGV[4]
  local resumed = e.o
  if not resumed and ARGV[5] ~= '' then e.o = ARGV[5] end
  redis.call('SET', KEYS[1], cjson.encode(e), 'KEEPTTL')
  if resumed then return {'new', resumed} end
  return {'new'}
end
local entry = {f = ARGV[1], t = tonumber(ARGV[2]), u = now + tonumber(ARGV[3]), c = ARGV[4]}
if ARGV[5] ~= '' then entry.o = ARGV[5] end
redis.call('SET', KEYS[1], cjson.encode(entry), 'PX', ARGV[2])
return {'new'}`;

// Both write only while ARGV[1] still owns the claim: not answered, not given back,
// not expired, and not claimed again since its lease ran out.
const COMPLETE = `
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local e = cjson.decode(v)
if e.r or e.c ~= ARGV[1] then return 0 end
e.c = nil
e.o = nil
e.r = ARGV[2]
local ttl = tonumber(ARGV[3])
if not ttl or ttl <= 0 then ttl = e.t end
redis.call('SET', KEYS[1], cjson.encode(e), 'PX', ttl)
return 1`;

const ABANDON = `
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local e = cjson.decode(v)
if e.r or e.c ~= ARGV[1] then return 0 end
if ARGV[2] and ARGV[2] ~= '' then
  e.c = nil
  e.o = ARGV[2]
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
    owner: string,
    hint: string,
  ): Promise<string[]>;
  hookgateIdemComplete(key: string, owner: string, record: string, ttlMs: number): Promise<number>;
  hookgateIdemAbandon(key: string, owner: string, resume: string): Promise<number>;
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
    hint?: ResumeHint,
  ): Promise<BeginResult<R>> {
    // Made here, not in the script: random ids across every gateway, and a script
    // that stays deterministic.
    const owner = randomBytes(12).toString('base64url');
    const [state, record] = await this.#redis.hookgateIdemBegin(
      this.#prefix + key,
      fingerprint,
      Math.max(1, Math.round(ttlMs)),
      Math.max(1, Math.round(leaseMs)),
      owner,
      // An empty hint is none (the script keeps nothing).
      hint ? JSON.stringify(hint) : '',
    );
    if (state === 'replay') return { state, record: JSON.parse(record ?? 'null') as R };
    if (state === 'new' && record) {
      return { state, owner, resume: JSON.parse(record) as ResumeHint };
    }
    if (state === 'new') return { state, owner };
    if (state === 'in-progress' || state === 'mismatch') return { state };
    throw new Error(`unexpected idempotency state ${String(state)}`);
  }

  async complete(key: string, owner: string, record: R, ttlMs?: number): Promise<boolean> {
    const stored = await this.#redis.hookgateIdemComplete(
      this.#prefix + key,
      owner,
      JSON.stringify(record),
      Math.round(ttlMs ?? 0),
    );
    return stored === 1;
  }

  async abandon(key: string, owner: string, resume?: ResumeHint): Promise<boolean> {
    // An empty hint is none (the script deletes the claim).
    const released = await this.#redis.hookgateIdemAbandon(
      this.#prefix + key,
      owner,
      resume ? JSON.stringify(resume) : '',
    );
    return released === 1;
  }
}
