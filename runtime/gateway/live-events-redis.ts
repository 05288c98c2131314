// The live event stream across gateways, over Redis pub/sub.
//
// - Events of a route travel on their own shard channel,
//   `hookgate:live:events:{<routeKey>}` (SPUBLISH / SSUBSCRIBE, Redis 7.0); a gateway
//   subscribes to it while one of its clients watches that route, so it receives only
//   what someone of its own wants. On a Redis Cluster a shard channel stays on the
//   master of its slot and its replicas; a classic PUBLISH went over the cluster bus to
//   every node, for every request of a watched route (ADR 0028 did the same for
//   execution events).
// - Publishing costs nothing on the request path while nobody elsewhere watches the
//   route: each gateway announces the routes its clients watch on one control
//   channel (`want` at once, again every `refreshMs`; `drop` when the last client
//   leaves), and every gateway keeps the announcements in memory. `wanted()` is a Map
//   lookup. An announcement not refreshed within three periods is forgotten (a
//   gateway that died). A gateway that starts says `hello`, and the others announce
//   again at once, so it learns the current subscriptions without waiting.
// - Order: one gateway publishes on one connection, and Redis delivers a
//   connection's messages in order, so each gateway's `seq` arrives in order.
import {
  duplicateClient,
  shardedSubscriberClient,
  type RedisClient,
} from '../../api/records/redis-client.ts';
import type { LiveEventBus, LiveListener } from './live-events.ts';

export const LIVE_EVENTS_PREFIX = 'hookgate:live:events:';
export const LIVE_CONTROL_CHANNEL = 'hookgate:live:control';

/** The shard channel of a route's events (the route key its hash tag). */
export const liveEventsChannel = (routeKey: string): string => `${LIVE_EVENTS_PREFIX}{${routeKey}}`;

interface Control {
  op: 'want' | 'drop' | 'hello';
  from: string;
  keys?: string[];
}

export interface RedisLiveEventBusOptions {
  /** Commands (SPUBLISH, PUBLISH); subscriber connections are made from it. */
  redis: RedisClient;
  /** This gateway's id, as in its events. */
  gateway: string;
  /** Announce watched routes this often (ms); default 5000. */
  refreshMs?: number;
  onError?: (err: unknown, where: string) => void;
}

export class RedisLiveEventBus implements LiveEventBus {
  readonly #redis: RedisClient;
  /** The control channel (classic: a few messages a gateway every `refreshMs`). */
  readonly #subscriber: RedisClient;
  /** The routes' shard channels (on a cluster, a connection to each master). */
  readonly #events: RedisClient;
  readonly #gateway: string;
  readonly #refreshMs: number;
  readonly #onError: (err: unknown, where: string) => void;
  /** routeKey -> (gateway -> announcement expiry, ms) of the other gateways. */
  readonly #remote = new Map<string, Map<string, number>>();
  /** routeKey -> this gateway's delivery function. */
  readonly #local = new Map<string, LiveListener>();
  readonly #timer: NodeJS.Timeout;

  private constructor(
    options: RedisLiveEventBusOptions,
    subscriber: RedisClient,
    events: RedisClient,
  ) {
    this.#redis = options.redis;
    this.#subscriber = subscriber;
    this.#events = events;
    this.#gateway = options.gateway;
    this.#refreshMs = options.refreshMs ?? 5_000;
    this.#onError = options.onError ?? (() => {});
    subscriber.on('message', (channel: string, message: string) => {
      try {
        if (channel === LIVE_CONTROL_CHANNEL) this.#onControl(JSON.parse(message) as Control);
      } catch (err) {
        this.#onError(err, 'live control message');
      }
    });
    events.on('smessage', (channel: string, message: string) => {
      try {
        this.#message(channel, message);
      } catch (err) {
        this.#onError(err, 'live event');
      }
    });
    this.#timer = setInterval(() => this.#tick(), this.#refreshMs);
    this.#timer.unref();
  }

  /**
   * Subscribed to the control channel, and the others asked for their subscriptions.
   * With Redis down at start-up this does not wait: ioredis subscribes on connect, and
   * the others' periodic announcements fill in what the hello would have asked for.
   */
  static async create(options: RedisLiveEventBusOptions): Promise<RedisLiveEventBus> {
    const subscriber = duplicateClient(options.redis);
    const bus = new RedisLiveEventBus(options, subscriber, shardedSubscriberClient(options.redis));
    const started = subscriber
      .subscribe(LIVE_CONTROL_CHANNEL)
      .then(() => bus.#control({ op: 'hello', from: options.gateway }))
      .catch((err: unknown) => bus.#onError(err, 'live events start'));
    if (options.redis.status === 'ready') await started;
    return bus;
  }

  wanted(routeKey: string): boolean {
    return this.#remote.has(routeKey);
  }

  publish(routeKey: string, kind: string, event: object): void {
    this.#redis
      .spublish(liveEventsChannel(routeKey), JSON.stringify({ kind, event }))
      .catch((err: unknown) => this.#onError(err, 'live event publish'));
  }

  watch(routeKey: string, deliver: LiveListener): () => void {
    this.#local.set(routeKey, deliver);
    this.#events
      .ssubscribe(liveEventsChannel(routeKey))
      .then(async () => {
        // Not after the watcher left (or the bus closed) meanwhile: the others would
        // publish for nobody until the announcement expired.
        if (this.#local.get(routeKey) !== deliver) return;
        await this.#control({ op: 'want', from: this.#gateway, keys: [routeKey] });
      })
      .catch((err: unknown) => this.#onError(err, 'live event subscribe'));
    return () => {
      if (this.#local.get(routeKey) !== deliver) return;
      this.#local.delete(routeKey);
      this.#events
        .sunsubscribe(liveEventsChannel(routeKey))
        .then(() => this.#control({ op: 'drop', from: this.#gateway, keys: [routeKey] }))
        .catch((err: unknown) => this.#onError(err, 'live event unsubscribe'));
    };
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    const keys = [...this.#local.keys()];
    this.#local.clear();
    if (keys.length > 0) {
      await this.#control({ op: 'drop', from: this.#gateway, keys }).catch(() => {});
    }
    this.#subscriber.disconnect();
    this.#events.disconnect();
  }

  #message(channel: string, message: string): void {
    if (!channel.startsWith(LIVE_EVENTS_PREFIX)) return;
    const deliver = this.#local.get(channel.slice(LIVE_EVENTS_PREFIX.length + 1, -1));
    const { kind, event } = JSON.parse(message) as { kind: string; event: { gateway?: string } };
    // This gateway's own events were delivered locally already.
    if (deliver && event.gateway !== this.#gateway) deliver(kind, event);
  }

  #onControl(control: Control): void {
    if (control.from === this.#gateway) return;
    if (control.op === 'hello') {
      this.#announce();
      return;
    }
    for (const key of control.keys ?? []) {
      let gateways = this.#remote.get(key);
      if (control.op === 'want') {
        if (!gateways) this.#remote.set(key, (gateways = new Map<string, number>()));
        gateways.set(control.from, Date.now() + 3 * this.#refreshMs);
      } else if (gateways) {
        gateways.delete(control.from);
        if (gateways.size === 0) this.#remote.delete(key);
      }
    }
  }

  /** Forget announcements that were not refreshed; refresh ours. */
  #tick(): void {
    const now = Date.now();
    for (const [key, gateways] of this.#remote) {
      for (const [gateway, expiry] of gateways) if (expiry < now) gateways.delete(gateway);
      if (gateways.size === 0) this.#remote.delete(key);
    }
    this.#announce();
  }

  #announce(): void {
    if (this.#local.size === 0) return;
    this.#control({ op: 'want', from: this.#gateway, keys: [...this.#local.keys()] }).catch(
      (err: unknown) => this.#onError(err, 'live event announce'),
    );
  }

  async #control(control: Control): Promise<void> {
    await this.#redis.publish(LIVE_CONTROL_CHANNEL, JSON.stringify(control));
  }
}
