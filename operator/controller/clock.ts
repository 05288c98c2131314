// Time as the controller machinery sees it. Production code uses `realClock`; tests
// inject a `FakeClock` (client-go's testing clock) and step it, so nothing in the
// queue, the rate limiters or leader election depends on wall-clock sleeps.

/** Cancels a timer started with `Clock.setTimer`. Calling it twice is harmless. */
export type CancelTimer = () => void;

export interface Clock {
  /** Milliseconds since some fixed origin (only differences matter). */
  now(): number;
  /** Run `fn` once after `ms` milliseconds. */
  setTimer(fn: () => void, ms: number): CancelTimer;
}

/**
 * The wall clock. Timers are ordinary (ref'd) timers on purpose: an informer waiting to
 * reconnect or a candidate waiting to retry the Lease may be the only thing pending
 * while the API server is unreachable, and the process must not exit then. Everything
 * that arms a timer cancels it on stop/shutdown.
 */
export const realClock: Clock = {
  now: () => performance.now(),
  setTimer(fn, ms) {
    const handle = setTimeout(fn, Math.max(0, ms));
    return () => clearTimeout(handle);
  },
};

interface FakeTimer {
  id: number;
  at: number;
  fn: () => void;
}

/** A manually stepped clock. Timers fire, in due order, only inside `step`/`setTime`. */
export class FakeClock implements Clock {
  #now: number;
  #timers: FakeTimer[] = [];
  #nextId = 0;

  constructor(start = 0) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimer(fn: () => void, ms: number): CancelTimer {
    const timer: FakeTimer = { id: this.#nextId++, at: this.#now + Math.max(0, ms), fn };
    this.#timers.push(timer);
    return () => {
      this.#timers = this.#timers.filter((t) => t !== timer);
    };
  }

  /** Number of timers not yet fired or cancelled (client-go's HasWaiters). */
  pendingTimers(): number {
    return this.#timers.length;
  }

  /** Advance by `ms`, firing every timer that falls due, earliest first. */
  step(ms: number): void {
    this.setTime(this.#now + ms);
  }

  setTime(t: number): void {
    for (;;) {
      const due = this.#timers
        .filter((x) => x.at <= t)
        .sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (!due) break;
      this.#timers = this.#timers.filter((x) => x !== due);
      this.#now = Math.max(this.#now, due.at);
      due.fn();
    }
    this.#now = t;
  }
}
