// Redis adapter of the sample store: gateways add request bodies, workers (or gateways
// running executions inline) add responses, any admin listener reads them. Per trigger
// and side, a list (LPUSH: newest first) and a byte count, both under one hash tag and
// with a TTL renewed by every write, so samples of a trigger nobody sends to any more
// expire. One Lua script per write keeps both bounds atomically: push, then pop the
// oldest while over the count or the bytes.
import type { RedisClient } from '../../api/records/redis-client.ts';
import {
  SAMPLE_SIDES,
  type SampleBounds,
  type SampleSide,
  type SampleStore,
  type StoredSamples,
} from './samples.ts';

const ADD = `
local bytes = string.len(ARGV[1])
local n = redis.call('LPUSH', KEYS[1], ARGV[1])
local total = redis.call('INCRBY', KEYS[2], bytes)
while n > tonumber(ARGV[2]) or total > tonumber(ARGV[3]) do
  local old = redis.call('RPOP', KEYS[1])
  if not old then
    redis.call('SET', KEYS[2], 0)
    break
  end
  total = redis.call('DECRBY', KEYS[2], string.len(old))
  n = n - 1
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return n`;

/** The command defineCommand adds to the client (ioredis cannot type it). */
interface SampleCommands {
  hookgateSampleAdd(
    list: string,
    bytes: string,
    json: string,
    maxSamples: number,
    maxBytes: number,
    ttlMs: number,
  ): Promise<number>;
}

/** How long a trigger's samples are kept after its last write (default 7 days). */
export const SAMPLE_TTL_MS = 7 * 24 * 60 * 60 * 1000;

export class RedisSampleStore implements SampleStore {
  readonly #redis: RedisClient;
  readonly #commands: SampleCommands;
  readonly #prefix: string;
  readonly #ttlMs: number;

  constructor(options: { redis: RedisClient; keyPrefix?: string; ttlMs?: number }) {
    this.#redis = options.redis;
    this.#redis.defineCommand('hookgateSampleAdd', { numberOfKeys: 2, lua: ADD });
    // defineCommand adds a method ioredis cannot type; the interface above names it.
    this.#commands = options.redis as unknown as SampleCommands;
    this.#prefix = options.keyPrefix ?? 'hookgate:samples:';
    this.#ttlMs = options.ttlMs ?? SAMPLE_TTL_MS;
  }

  /** The list key of a side; `{…}` keeps a trigger's keys in one cluster slot. */
  #key(triggerKey: string, side: SampleSide): string {
    return `${this.#prefix}{${triggerKey}}:${side}`;
  }

  async add(
    triggerKey: string,
    side: SampleSide,
    json: string,
    bounds: SampleBounds,
  ): Promise<void> {
    if (Buffer.byteLength(json) > bounds.maxBytes || bounds.maxSamples < 1) return;
    const list = this.#key(triggerKey, side);
    await this.#commands.hookgateSampleAdd(
      list,
      `${list}:bytes`,
      json,
      bounds.maxSamples,
      bounds.maxBytes,
      this.#ttlMs,
    );
  }

  async read(triggerKey: string): Promise<StoredSamples> {
    const [requests, responses] = await Promise.all(
      SAMPLE_SIDES.map((side) => this.#redis.lrange(this.#key(triggerKey, side), 0, -1)),
    );
    return { requests: requests ?? [], responses: responses ?? [] };
  }

  async clear(triggerKey: string): Promise<void> {
    const keys = SAMPLE_SIDES.flatMap((side) => {
      const list = this.#key(triggerKey, side);
      return [list, `${list}:bytes`];
    });
    await this.#redis.del(...keys);
  }
}
