// GCRA in Redis, shared by every gateway replica: the step of gcra.ts as one Lua script
// (registered with defineCommand: EVALSHA, falling back to EVAL after a SCRIPT FLUSH or
// a restart). Check and update are one atomic script, so of many concurrent requests
// exactly the limit passes; the time is Redis's own (TIME), so replicas' clocks do not
// matter; the state is written with SET … PX in the same script, so the key never
// lives without a TTL, and the TTL is the backlog: the key disappears exactly when it
// would mean "no requests counted" (at most about 60 s).
//
// Value: "<tat µs>:<interval µs>". Anything else (a foreign value) counts as no state.
import type { RedisClient } from '../../../api/records/redis-client.ts';
import { emissionIntervalUs, type GcraResult } from './gcra.ts';

// ARGV: limit, interval (µs). Returns {allowed, remaining, retry µs, reset µs}.
// Lua numbers are doubles: every value here is an integer below 2^53 (µs since 1970 is
// about 1.8e15), and string.format('%d') writes it without losing digits.
const GCRA = `
local limit = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local tolerance = limit * interval
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local backlog = 0
local rescaled = false
local stored = redis.call('GET', KEYS[1])
if stored then
  local tat, was = string.match(stored, '^(%d+):(%d+)$')
  if tat then
    backlog = math.max(0, tonumber(tat) - now)
    was = tonumber(was)
    if backlog > 0 and was > 0 and was ~= interval then
      backlog = math.min(math.ceil(backlog * interval / was), tolerance)
      rescaled = true
    end
  end
end
local after = backlog + interval
if after > tolerance then
  if rescaled then
    redis.call('SET', KEYS[1], string.format('%d:%d', now + backlog, interval),
      'PX', math.ceil(backlog / 1000))
  end
  return {0, 0, after - tolerance, backlog}
end
redis.call('SET', KEYS[1], string.format('%d:%d', now + after, interval),
  'PX', math.ceil(after / 1000))
return {1, math.floor((tolerance - after) / interval), 0, after}`;

/** The command defineCommand adds to the client (ioredis cannot type it). */
interface GcraCommands {
  hookgateGcra(key: string, limit: number, intervalUs: number): Promise<number[]>;
}

export class RedisGcraStore {
  readonly #redis: RedisClient;
  readonly #commands: GcraCommands;

  constructor(redis: RedisClient) {
    redis.defineCommand('hookgateGcra', { numberOfKeys: 1, lua: GCRA });
    this.#redis = redis;
    // defineCommand adds a method ioredis cannot type; the interface above names it.
    this.#commands = redis as unknown as GcraCommands;
  }

  /** Rejects at once when the client is not connected (it would only queue or fail). */
  take(key: string, limit: number): Promise<GcraResult> {
    if (this.#redis.status !== 'ready') {
      return Promise.reject(new Error(`rate limiter Redis client is ${this.#redis.status}`));
    }
    return this.#commands.hookgateGcra(key, limit, emissionIntervalUs(limit)).then(toResult);
  }
}

function toResult([allowed, remaining, retryAfterUs, resetAfterUs]: number[]): GcraResult {
  return {
    allowed: allowed === 1,
    remaining: remaining ?? 0,
    retryAfterUs: retryAfterUs ?? 0,
    resetAfterUs: resetAfterUs ?? 0,
  };
}
