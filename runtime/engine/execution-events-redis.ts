// Relays an execution's events from Redis to listeners in this process (a gateway
// answering Wait for Completion, SSE, a respond node or an events subscription for an
// execution that a worker runs).
//
// Subscribing first and reading the stored history second means no event falls in
// between: live messages that arrive while the history is read are held back, then
// delivered after it with duplicates (seq ≤ last delivered) dropped. The history read
// also marks the execution watched: writes publish its events from then on, and only
// then (execution-store-redis.ts). A message is one
// event or an array of them (a batch, in seq order). One subscriber
// connection serves every listener of the process; a channel is subscribed while it
// has listeners and dropped after the execution's last event.
import type { RedisClient } from '../../api/records/redis-client.ts';
import type { RedisExecutionStore } from './execution-store-redis.ts';
import type { SequencedEvent } from './ports.ts';

type Listener = (event: SequencedEvent) => void;

/** A channel subscribed for this process's listeners. */
interface Channel {
  subs: Set<Subscription>;
  /** Its SUBSCRIBE: a later listener reads the history only once it is done. */
  subscribed: Promise<unknown>;
}

interface Subscription {
  listener: Listener;
  lastSeq: number;
  /** Live events that arrived while the history was being read. */
  held: SequencedEvent[] | undefined;
  closed: boolean;
}

const isTerminal = (e: SequencedEvent) => e.type === 'completed' || e.type === 'failed';

/** Whether a relayed message holds what an event needs to be delivered in order. */
function isSequencedEvent(value: unknown): value is SequencedEvent {
  if (typeof value !== 'object' || value === null) return false;
  const { seq, type } = value as { seq?: unknown; type?: unknown };
  return typeof seq === 'number' && Number.isInteger(seq) && typeof type === 'string';
}

export interface RedisExecutionEventsOptions {
  /** A connection of its own: once subscribed, it can do nothing else. */
  subscriber: RedisClient;
  store: RedisExecutionStore;
  onInternalError?: (error: unknown, where: string) => void;
}

export class RedisExecutionEvents {
  readonly #subscriber: RedisClient;
  readonly #store: RedisExecutionStore;
  readonly #channels = new Map<string, Channel>();
  readonly #onInternalError: (error: unknown, where: string) => void;

  constructor(options: RedisExecutionEventsOptions) {
    this.#subscriber = options.subscriber;
    this.#store = options.store;
    this.#onInternalError =
      options.onInternalError ??
      ((error, where) => console.error(`hookgate events: ${where}:`, error));
    this.#subscriber.on('message', (channel: string, message: string) => {
      const subs = this.#channels.get(channel)?.subs;
      if (!subs) return;
      let parsed: unknown;
      try {
        parsed = JSON.parse(message);
      } catch (error) {
        this.#onInternalError(error, `event on ${channel}`);
        return;
      }
      // One event (what workers publish), or an array of them in seq order (taken too:
      // ADR 0026 measured the writers' side slower and left it). Anything else is
      // reported, not delivered.
      for (const event of Array.isArray(parsed) ? (parsed as unknown[]) : [parsed]) {
        if (!isSequencedEvent(event)) {
          this.#onInternalError(new Error('not an execution event'), `event on ${channel}`);
          continue;
        }
        for (const sub of subs) {
          if (sub.held) sub.held.push(event);
          else this.#deliver(channel, sub, event);
        }
      }
    });
  }

  /** Listeners attached now (tests: unsubscribing must not leak). */
  get listenerCount(): number {
    let n = 0;
    for (const { subs } of this.#channels.values()) n += subs.size;
    return n;
  }

  subscribe(id: string, afterSeq: number, listener: Listener): () => void {
    const channel = this.#store.layout.of(id).channel(id);
    const sub: Subscription = { listener, lastSeq: afterSeq, held: [], closed: false };
    let entry = this.#channels.get(channel);
    if (!entry) {
      entry = { subs: new Set(), subscribed: this.#subscriber.subscribe(channel) };
      this.#channels.set(channel, entry);
    }
    entry.subs.add(sub);
    entry.subscribed
      .then(() => this.#store.watchEvents(id, afterSeq))
      .then((history) => {
        const held = sub.held ?? [];
        sub.held = undefined;
        for (const event of [...history, ...held]) this.#deliver(channel, sub, event);
      })
      .catch((error: unknown) => {
        this.#onInternalError(error, `subscribing to ${id}`);
        this.#drop(channel, sub);
      });
    return () => this.#drop(channel, sub);
  }

  /** Drops every subscription (shutdown); the subscriber connection is the caller's. */
  close(): void {
    for (const [channel, { subs }] of this.#channels) {
      for (const sub of subs) sub.closed = true;
      void this.#subscriber.unsubscribe(channel).catch(() => {});
    }
    this.#channels.clear();
  }

  #deliver(channel: string, sub: Subscription, event: SequencedEvent): void {
    if (sub.closed || event.seq <= sub.lastSeq) return;
    sub.lastSeq = event.seq;
    try {
      sub.listener(event);
    } catch (error) {
      this.#onInternalError(error, 'event listener');
      this.#drop(channel, sub);
      return;
    }
    if (isTerminal(event)) this.#drop(channel, sub);
  }

  #drop(channel: string, sub: Subscription): void {
    if (sub.closed) return;
    sub.closed = true;
    const subs = this.#channels.get(channel)?.subs;
    if (!subs) return;
    subs.delete(sub);
    if (subs.size === 0) {
      this.#channels.delete(channel);
      this.#subscriber.unsubscribe(channel).catch((error: unknown) => {
        this.#onInternalError(error, `unsubscribing from ${channel}`);
      });
    }
  }
}
