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
// connection serves every listener of the process (on a Redis Cluster, one per master:
// shardedSubscriberClient); a channel is subscribed while it has listeners and dropped after
// the execution's last event.
//
// Sharded pub/sub (SSUBSCRIBE; the writers SPUBLISH): a channel carries its execution's
// hash tag, so a Redis Cluster keeps each message on the shard that owns the execution,
// where a PUBLISH is sent to every node of the cluster: the cost of a watched event
// would grow with the number of masters. Redis 7.0 or newer.
//
// Gone: a subscriber that passes `onGone` knows the execution was written (its gateway's
// enqueue, or a record it read). Its history read then marks the execution only if its
// hash is there, and a catch-up looks for the hash too: none means the execution is gone
// (discarded: its events are kept for the handover time only, 5 s, ADR 0041; dropped by
// the byte budget; expired), so its end will never be published. The subscriber is told
// at once (with the tombstone a discard that came with an Idempotency-Key left), instead
// of waiting until its own timeout. No command more on a normal subscription; a
// catch-up that finds it gone reads the tombstone (one GET).
import type { RedisClient } from '../../api/records/redis-client.ts';
import type { RedisExecutionStore } from './execution-store-redis.ts';
import type { ExecutionGone, SequencedEvent } from './ports.ts';

type Listener = (event: SequencedEvent) => void;
type GoneListener = (gone: ExecutionGone) => void;

/** A channel subscribed for this process's listeners. */
interface Channel {
  /** The execution whose events it carries. */
  id: string;
  subs: Set<Subscription>;
  /** Its SSUBSCRIBE: a later listener reads the history only once it is done. */
  subscribed: Promise<unknown>;
}

interface Subscription {
  listener: Listener;
  /** Told when the execution is gone (see the top); absent: the listener just waits. */
  onGone: GoneListener | undefined;
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
    // Back after a lost connection (one server: ready again; a cluster: its subscribers
    // per master made again): what was published meanwhile reached nobody.
    this.#subscriber.on('ready', () => this.#catchUp());
    this.#subscriber.on('subscribersReady', () => this.#catchUp());
    this.#subscriber.on('smessage', (channel: string, message: string) => {
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
        this.#relay(channel, subs, event);
      }
    });
  }

  #relay(channel: string, subs: Set<Subscription>, event: SequencedEvent): void {
    for (const sub of subs) {
      if (sub.held) sub.held.push(event);
      else this.#deliver(channel, sub, event);
    }
  }

  /**
   * Subscribes every channel again (harmless when the client did already: its reply
   * says the subscription is in place), then relays each execution's events stored
   * after the oldest its listeners had: the ones published while the connection was
   * lost. Duplicates are dropped as ever (seq). An execution with no hash left is gone:
   * its listeners whose history read is done (it marked the execution, or found it
   * written) are told; one still reading its history finds that out itself (its read
   * may be what writes the mark of an execution not written yet).
   */
  #catchUp(): void {
    for (const [channel, entry] of this.#channels) {
      let after = Infinity;
      for (const sub of entry.subs) after = Math.min(after, sub.lastSeq);
      entry.subscribed = this.#subscriber.ssubscribe(channel);
      entry.subscribed
        .then(() => this.#store.storedEvents(entry.id, after))
        .then((events) => {
          if (events === undefined) {
            const told = [...entry.subs].filter((sub) => sub.held === undefined && sub.onGone);
            if (told.length > 0) this.#tellGone(channel, entry.id, told);
            return;
          }
          for (const event of events) this.#relay(channel, entry.subs, event);
        })
        .catch((error: unknown) => this.#onInternalError(error, `catching up on ${entry.id}`));
    }
  }

  /**
   * Tells `subs` their execution is gone, with its tombstone if a discard left one, and
   * drops them. Reading the tombstone failed: told without it (the result is gone
   * either way).
   */
  #tellGone(channel: string, id: string, subs: Subscription[]): void {
    this.#store
      .discarded(id)
      .catch((error: unknown) => {
        this.#onInternalError(error, `reading the tombstone of ${id}`);
        return undefined;
      })
      .then((tombstone) => {
        const gone: ExecutionGone = tombstone ? { discarded: tombstone } : {};
        for (const sub of subs) {
          if (sub.closed) continue;
          this.#drop(channel, sub);
          try {
            sub.onGone?.(gone);
          } catch (error) {
            this.#onInternalError(error, 'gone listener');
          }
        }
      })
      .catch((error: unknown) => this.#onInternalError(error, `telling ${id} is gone`));
  }

  /** Listeners attached now (tests: unsubscribing must not leak). */
  get listenerCount(): number {
    let n = 0;
    for (const { subs } of this.#channels.values()) n += subs.size;
    return n;
  }

  /**
   * `onGone`: the execution is known to be written (see the top); called, and the
   * listener dropped, once it is found gone before its end was delivered.
   */
  subscribe(id: string, afterSeq: number, listener: Listener, onGone?: GoneListener): () => void {
    const channel = this.#store.layout.of(id).channel(id);
    const sub: Subscription = { listener, onGone, lastSeq: afterSeq, held: [], closed: false };
    let entry = this.#channels.get(channel);
    if (!entry) {
      entry = { id, subs: new Set(), subscribed: this.#subscriber.ssubscribe(channel) };
      this.#channels.set(channel, entry);
    }
    entry.subs.add(sub);
    entry.subscribed
      .then(() =>
        onGone
          ? this.#store.watchStoredEvents(id, afterSeq)
          : this.#store.watchEvents(id, afterSeq),
      )
      .then((history) => {
        const held = sub.held ?? [];
        sub.held = undefined;
        // In seq order: a catch-up may have held events older than live ones.
        held.sort((a, b) => a.seq - b.seq);
        for (const event of [...(history ?? []), ...held]) this.#deliver(channel, sub, event);
        // Gone before its end reached this listener (held ones included).
        if (history === undefined && !sub.closed) this.#tellGone(channel, id, [sub]);
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
      void this.#subscriber.sunsubscribe(channel).catch(() => {});
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
      this.#subscriber.sunsubscribe(channel).catch((error: unknown) => {
        this.#onInternalError(error, `unsubscribing from ${channel}`);
      });
    }
  }
}
