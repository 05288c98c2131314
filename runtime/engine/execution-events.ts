// The event stream of an execution: events numbered as they happen, handed to live
// listeners, and written to the execution store, either as they come (streamEvents:
// a worker, whose events gateways elsewhere relay) or with the final record.
import type { ExecutionStore } from './execution-store.ts';
import type { Execution, ExecutionEvent, SequencedEvent } from './ports.ts';

export type Listener = (event: SequencedEvent) => void;

export function isTerminal(event: ExecutionEvent): boolean {
  return event.type === 'completed' || event.type === 'failed';
}

/** Where the events of one engine's executions go; shared by their streams. */
export interface EventOutlet {
  store: ExecutionStore;
  /** Write events as they are emitted instead of all at the end. */
  streamEvents: boolean;
  onInternalError: (error: unknown, where: string) => void;
}

/** The events of one run of an execution, while it is hot. */
export class EventStream {
  /** Events of this run; their seq continues after `seqBase` (events of earlier runs). */
  readonly events: SequencedEvent[] = [];
  readonly #execution: Execution;
  readonly #seqBase: number;
  readonly #outlet: EventOutlet;
  /** Made with the first subscriber: most runs have none. */
  #listeners: Set<Listener> | undefined;
  /** streamEvents: events not sent to the store yet (see #stream). */
  #unsent: SequencedEvent[] = [];
  /** streamEvents: this run's appends, and whether one of them failed. */
  readonly #appends: Promise<void>[] = [];
  #appendFailed = false;
  /** streamEvents: the terminal event was emitted; what is unsent goes with the record. */
  #ending = false;
  /** streamEvents: the record goes with the next append (saveWithFirstEvents). */
  #recordDue = false;
  /** persist() acknowledged the run's queue entry with the final record. */
  #acknowledged = false;

  constructor(execution: Execution, seqBase: number, outlet: EventOutlet) {
    this.#execution = execution;
    this.#seqBase = seqBase;
    this.#outlet = outlet;
  }

  /** Listeners attached now. */
  get listenerCount(): number {
    return this.#listeners?.size ?? 0;
  }

  /** Whether persist() acknowledged the run's queue entry in the store (one step with the record). */
  get acknowledged(): boolean {
    return this.#acknowledged;
  }

  /**
   * Streaming to a store that writes a record with events in one step: the record as it
   * is then goes with the run's next append, or with the final record, instead of a save
   * of its own now (a worker's running record: one store call fewer per run, none for a
   * run that ends in the turn it started). Returns false when the store cannot; the
   * caller then saves it.
   */
  saveWithFirstEvents(): boolean {
    if (!this.#outlet.streamEvents || !this.#outlet.store.saveWithEvents) return false;
    this.#recordDue = true;
    return true;
  }

  /**
   * Numbers an event and hands it to the listeners (and, streaming, to the store). The
   * event literal of the caller, always a fresh object, becomes the sequenced event
   * instead of being copied; `at` is the time the caller already stamped its record
   * or log line with.
   */
  emit(event: ExecutionEvent, at: string): void {
    const sequenced = event as SequencedEvent;
    sequenced.executionId = this.#execution.id;
    sequenced.seq = this.#seqBase + this.events.length + 1;
    sequenced.at = at;
    this.events.push(sequenced);
    if (this.#outlet.streamEvents) this.#stream(sequenced);
    const listeners = this.#listeners;
    if (listeners === undefined) return;
    // A copy: a listener may unsubscribe or subscribe others while it is called.
    if (listeners.size > 0) {
      for (const listener of [...listeners]) {
        try {
          listener(sequenced);
        } catch (error) {
          listeners.delete(listener);
          this.#outlet.onInternalError(error, 'event listener');
        }
      }
    }
    if (isTerminal(event)) listeners.clear();
  }

  /** Replays the events after `afterSeq`, then (unless the run has ended) the live ones. */
  subscribe(afterSeq: number, listener: Listener): () => void {
    try {
      for (const event of this.events) if (event.seq > afterSeq) listener(event);
    } catch (error) {
      this.#outlet.onInternalError(error, 'event listener');
      return () => {};
    }
    const terminal = this.events.at(-1);
    if (terminal && isTerminal(terminal)) return () => {};
    const listeners = (this.#listeners ??= new Set());
    listeners.add(listener);
    return () => listeners.delete(listener);
  }

  /**
   * Writes the final record and the events. Streaming, the events up to the terminal
   * one are stored as they come; the terminal one and those held with it go with the
   * final record, in one step where the store has `saveWithEvents` (Redis: one script),
   * so a run that dies in between leaves neither, and with them the acknowledgement of
   * `acknowledge` (the job's queue entry; see `acknowledged`). The whole history is
   * written again (the store skips the events it has) only if an append failed. Never
   * rejects: resolves true when the record and every event were written, false when the
   * store failed.
   */
  async persist(acknowledge?: string): Promise<boolean> {
    const { store, streamEvents } = this.#outlet;
    try {
      if (!streamEvents) {
        await store.save(this.#execution);
        await store.appendEvents(this.events);
        return true;
      }
      // The earlier appends first (seq order), then the record with the events held
      // since the terminal one, in one step where the store can.
      const last = await this.#unwritten();
      if (store.saveWithEvents) {
        await store.saveWithEvents(this.#execution, last, acknowledge);
        this.#acknowledged = acknowledge !== undefined;
      } else {
        await store.save(this.#execution);
        if (last.length > 0) await store.appendEvents(last);
      }
      return true;
    } catch (error) {
      this.#outlet.onInternalError(error, 'saving execution');
      return false;
    }
  }

  /**
   * Instead of persist() for a succeeded execution whose workflow discards such records
   * (ADR 0041): the store removes the record and events (ExecutionStore.discard), taking
   * the events not written yet (a watcher elsewhere still gets them) and acknowledging
   * `acknowledge` in the same step. The listeners here got every event as it came. Never
   * rejects: resolves true once the store has done it, false when it failed (the caller
   * then leaves the job for the queue to run again, as when persist fails). `watched`:
   * a caller waits for its end (StartRequest.watched); `tombstoneMs`: it came with an
   * Idempotency-Key kept this long (StartRequest.idempotencyWindowMs).
   */
  async discard(
    acknowledge: string | undefined,
    watched: boolean,
    tombstoneMs?: number,
  ): Promise<boolean> {
    const { store, streamEvents } = this.#outlet;
    try {
      const last = streamEvents ? await this.#unwritten() : this.events;
      await store.discard(this.#execution, last, {
        ...(acknowledge === undefined ? {} : { acknowledge }),
        watched,
        ...(tombstoneMs === undefined ? {} : { tombstoneMs }),
      });
      this.#acknowledged = acknowledge !== undefined;
      return true;
    } catch (error) {
      this.#outlet.onInternalError(error, 'discarding execution');
      return false;
    }
  }

  /**
   * Streaming, the events the finishing write takes, once the appends so far are done:
   * those held since the terminal one, or all of them again if an append failed (the
   * store skips those it has).
   */
  async #unwritten(): Promise<SequencedEvent[]> {
    await Promise.all(this.#appends);
    const last = this.#appendFailed ? this.events : this.#unsent;
    this.#unsent = [];
    this.#recordDue = false;
    return last;
  }

  /**
   * Waits until the events so far are in the store (before the execution is handed to
   * another process). Rejects when they could not be written.
   */
  async settle(): Promise<void> {
    const { store, streamEvents } = this.#outlet;
    // The caller writes the record next (a retry hand-off: queued, nextAttemptAt, with
    // the due attempt in one step); it must not go alone before that.
    this.#recordDue = false;
    if (streamEvents) {
      this.#sendEvents();
      await Promise.all(this.#appends);
    }
    if (!streamEvents || this.#appendFailed) await store.appendEvents(this.events);
  }

  /**
   * streamEvents: an append is a store call (a Lua script in Redis) that costs more than
   * the node run that made the event, so the events of one turn of the event loop go in
   * one append; those a gateway waits on (respond, completed, failed) go at once, with
   * whatever came before them. The terminal one waits for the final record (persist),
   * so that both are written together.
   */
  #stream(event: SequencedEvent): void {
    this.#unsent.push(event);
    if (isTerminal(event)) this.#ending = true;
    else if (event.type === 'respond') this.#sendEvents();
    else if (this.#unsent.length === 1) setImmediate(() => this.#sendEvents());
  }

  #sendEvents(): void {
    if (this.#unsent.length === 0 || this.#ending) return;
    const events = this.#unsent;
    this.#unsent = [];
    const { store } = this.#outlet;
    const written =
      this.#recordDue && store.saveWithEvents
        ? store.saveWithEvents(this.#execution, events)
        : store.appendEvents(events);
    this.#recordDue = false;
    const append = written.catch((error: unknown) => {
      this.#appendFailed = true;
      this.#outlet.onInternalError(error, 'saving an event');
    });
    this.#appends.push(append);
  }
}

/**
 * Hands a finished (or unknown) execution's stored events after `afterSeq` to
 * `listener`: the whole history is in the store, nothing more will come.
 */
export function replayStored(
  outlet: EventOutlet,
  id: string,
  afterSeq: number,
  listener: Listener,
): () => void {
  let cancelled = false;
  outlet.store.events(id, afterSeq).then(
    (events) => {
      try {
        for (const event of events) if (!cancelled) listener(event);
      } catch (error) {
        outlet.onInternalError(error, 'event listener');
      }
    },
    (error: unknown) => outlet.onInternalError(error, 'reading events'),
  );
  return () => {
    cancelled = true;
  };
}
