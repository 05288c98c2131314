// Redis adapter of the record stores: one hash per store (field = record key, value =
// JSON), and a pub/sub channel that announces every change, so each gateway replica
// rebuilds its route table when the operator deploys or removes a route.
import { duplicateClient, type RedisClient } from './redis-client.ts';
import type { ChangeListener, RecordStore, WrittenFor } from './records.ts';

export interface RedisRecordStoreOptions {
  /** Commands (HSET, HGET, ...). */
  redis: RedisClient;
  /**
   * A second connection for the change feed (a subscribed connection can do nothing
   * else). Made with `redis.duplicate()` on the first subscribe when omitted.
   */
  subscriber?: RedisClient;
  /** The hash, e.g. `hookgate:routes`. The channel is `<key>:changed`. */
  key: string;
}

/**
 * deleteIf: HDEL the field, and announce it, only while it holds the expected JSON.
 * KEYS[1] the hash; ARGV the field, the expected JSON, the channel.
 */
const DELETE_IF = `
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('PUBLISH', ARGV[3], ARGV[1])
return 1`;

/**
 * The start of the versioned writes: return 0 (nothing written) when the field holds a
 * record of the writer's object (the same non-empty uid) at a greater generation, as
 * records.ts `supersedes` says. A value that is not a JSON object is no record.
 * KEYS[1] the hash; ARGV[1] the field, ARGV[2] the channel, ARGV[3] the writer's uid,
 * ARGV[4] its generation.
 */
const UNLESS_SUPERSEDED = `
local current = redis.call('HGET', KEYS[1], ARGV[1])
if current and ARGV[3] ~= '' then
  local ok, stored = pcall(cjson.decode, current)
  if ok and type(stored) == 'table' and stored.uid == ARGV[3]
    and type(stored.generation) == 'number' and stored.generation > tonumber(ARGV[4]) then
    return 0
  end
end`;

/** putUnlessSuperseded: then HSET ARGV[5] and announce it. */
const PUT_UNLESS_SUPERSEDED = `${UNLESS_SUPERSEDED}
redis.call('HSET', KEYS[1], ARGV[1], ARGV[5])
redis.call('PUBLISH', ARGV[2], ARGV[1])
return 1`;

/** deleteUnlessSuperseded: then HDEL, announced when there was something to delete. */
const DELETE_UNLESS_SUPERSEDED = `${UNLESS_SUPERSEDED}
if current then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('PUBLISH', ARGV[2], ARGV[1])
end
return 1`;

/** The commands defineCommand adds to the client (ioredis cannot type them). */
interface RecordCommands {
  hookgateRecordDeleteIf(
    hash: string,
    field: string,
    expected: string,
    channel: string,
  ): Promise<number>;
  hookgateRecordPutUnlessSuperseded(
    hash: string,
    field: string,
    channel: string,
    uid: string,
    generation: number,
    value: string,
  ): Promise<number>;
  hookgateRecordDeleteUnlessSuperseded(
    hash: string,
    field: string,
    channel: string,
    uid: string,
    generation: number,
  ): Promise<number>;
}

/** Route store and workflow registry in Redis: `hookgate:routes`, `hookgate:workflows`. */
export const REDIS_KEYS = { routes: 'hookgate:routes', workflows: 'hookgate:workflows' } as const;

export class RedisRecordStore<T> implements RecordStore<T> {
  readonly #redis: RedisClient;
  readonly #key: string;
  readonly #channel: string;
  readonly #listeners = new Set<ChangeListener>();
  #subscriber: RedisClient | undefined;
  #ownSubscriber = false;
  #subscribed: Promise<unknown> | undefined;

  readonly #commands: RecordCommands;

  constructor(options: RedisRecordStoreOptions) {
    this.#redis = options.redis;
    options.redis.defineCommand('hookgateRecordDeleteIf', { numberOfKeys: 1, lua: DELETE_IF });
    options.redis.defineCommand('hookgateRecordPutUnlessSuperseded', {
      numberOfKeys: 1,
      lua: PUT_UNLESS_SUPERSEDED,
    });
    options.redis.defineCommand('hookgateRecordDeleteUnlessSuperseded', {
      numberOfKeys: 1,
      lua: DELETE_UNLESS_SUPERSEDED,
    });
    // defineCommand adds a method ioredis cannot type; the interface above names it.
    this.#commands = options.redis as unknown as RecordCommands;
    this.#key = options.key;
    this.#channel = `${options.key}:changed`;
    this.#subscriber = options.subscriber;
  }

  async put(key: string, value: T): Promise<void> {
    // One round trip, applied atomically: the write and its announcement.
    await this.#redis
      .multi()
      .hset(this.#key, key, JSON.stringify(value))
      .publish(this.#channel, key)
      .exec();
  }

  async delete(key: string): Promise<void> {
    const removed = await this.#redis.hdel(this.#key, key);
    if (removed > 0) await this.#redis.publish(this.#channel, key);
  }

  /**
   * One script: the field is compared with the record as read (a record `put` wrote
   * reads back to the same JSON), deleted and announced only while it still matches.
   */
  async deleteIf(key: string, expected: T): Promise<boolean> {
    const deleted = await this.#commands.hookgateRecordDeleteIf(
      this.#key,
      key,
      JSON.stringify(expected),
      this.#channel,
    );
    return deleted === 1;
  }

  /** One script: the stored record's uid and generation read, compared, then the write. */
  async putUnlessSuperseded(key: string, value: T & WrittenFor): Promise<boolean> {
    const written = await this.#commands.hookgateRecordPutUnlessSuperseded(
      this.#key,
      key,
      this.#channel,
      value.uid ?? '',
      value.generation,
      JSON.stringify(value),
    );
    return written === 1;
  }

  async deleteUnlessSuperseded(key: string, writer: WrittenFor): Promise<boolean> {
    const deleted = await this.#commands.hookgateRecordDeleteUnlessSuperseded(
      this.#key,
      key,
      this.#channel,
      writer.uid ?? '',
      writer.generation,
    );
    return deleted === 1;
  }

  async get(key: string): Promise<T | undefined> {
    const text = await this.#redis.hget(this.#key, key);
    return text === null ? undefined : (JSON.parse(text) as T);
  }

  async list(): Promise<T[]> {
    const values = await this.#redis.hvals(this.#key);
    return values.map((text) => JSON.parse(text) as T);
  }

  /** The keys of the records, without reading (or parsing) the records themselves. */
  keys(): Promise<string[]> {
    return this.#redis.hkeys(this.#key);
  }

  subscribe(listener: ChangeListener): () => void {
    this.#listeners.add(listener);
    if (!this.#subscribed) {
      if (!this.#subscriber) {
        this.#subscriber = duplicateClient(this.#redis);
        this.#ownSubscriber = true;
      }
      const sub = this.#subscriber;
      // The message is the key that changed (see put and delete).
      sub.on('message', (channel: string, key: string) => {
        if (channel === this.#channel) for (const l of [...this.#listeners]) l(key);
      });
      // After a reconnect, changes may have been missed: tell listeners to re-read.
      sub.on('ready', () => {
        for (const l of [...this.#listeners]) l();
      });
      // Redis may be down now: ioredis subscribes again on every reconnect, and the
      // `ready` handler above re-reads, so a failed first attempt is not an error.
      this.#subscribed = sub.subscribe(this.#channel).catch(() => undefined);
    }
    return () => this.#listeners.delete(listener);
  }

  /** Resolves once the change feed is live (after the first subscribe). */
  async ready(): Promise<void> {
    await this.#subscribed;
  }

  /** Stop the change feed (the command connection belongs to the caller). */
  close(): void {
    if (this.#ownSubscriber) this.#subscriber?.disconnect();
    this.#listeners.clear();
  }
}
