// Redis adapter of the replay store: every gateway replica sees the same claims, so a
// delivery replayed to another replica is refused too. A claim is one `SET key 1 NX PX
// ttl`: Redis runs it atomically, so of many concurrent claims exactly one gets OK.
import type { RedisClient } from '../../../../../api/records/redis-client.ts';
import type { ReplayStore } from './replay.ts';

export class RedisReplayStore implements ReplayStore {
  readonly #redis: RedisClient;
  readonly #prefix: string;

  constructor(options: { redis: RedisClient; keyPrefix?: string }) {
    this.#redis = options.redis;
    this.#prefix = options.keyPrefix ?? 'hookgate:replay:';
  }

  async claim(key: string, ttlMs: number): Promise<boolean> {
    const answer = await this.#redis.set(
      this.#prefix + key,
      '1',
      'PX',
      Math.max(1, Math.round(ttlMs)),
      'NX',
    );
    return answer === 'OK';
  }

  async release(key: string): Promise<void> {
    await this.#redis.del(this.#prefix + key);
  }
}
