// A circuit breaker for one dependency (the gateway's Redis). Synchronous by design:
// `allows()` is asked inside the Redis client's sendCommand, for every command, so
// that auto-pipelining and command order are untouched and a refusal costs no
// promise, timer or allocation (ADR 0016 says why this is not cockatiel or opossum).
//
//   closed     every call goes through; `failureThreshold` failures in a row open it
//   open       every call is refused at once; after `openMs` the breaker probes
//   half-open  calls are still refused; one probe (e.g. PING) is in flight: its
//              success closes the breaker, its failure opens it for another `openMs`
//
// The breaker probes by itself instead of letting a caller's request through as the
// probe: no request waits on a dependency that is probably down, and a breaker with
// no traffic (a pod taken out of its Service while not ready) still closes again.

export type CircuitState = 'closed' | 'open' | 'half-open';

export interface CircuitBreakerOptions {
  /** Failures in a row (no success in between) that open the breaker. Default 5. */
  failureThreshold?: number;
  /** How long the breaker stays open before it probes. Default 1000 ms. */
  openMs?: number;
  /** The probe of the half-open state: resolves when the dependency answers. */
  probe: () => Promise<unknown>;
  /** Told about every change of state (metrics, logs). */
  onStateChange?: (state: CircuitState, previous: CircuitState) => void;
}

export class CircuitBreaker {
  readonly failureThreshold: number;
  readonly openMs: number;
  readonly #probe: () => Promise<unknown>;
  readonly #onStateChange: ((state: CircuitState, previous: CircuitState) => void) | undefined;
  #state: CircuitState = 'closed';
  #failures = 0;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(options: CircuitBreakerOptions) {
    this.failureThreshold = Math.max(1, options.failureThreshold ?? 5);
    this.openMs = Math.max(1, options.openMs ?? 1000);
    this.#probe = options.probe;
    this.#onStateChange = options.onStateChange;
  }

  get state(): CircuitState {
    return this.#state;
  }

  /** Whether a call may go to the dependency now. */
  allows(): boolean {
    return this.#state === 'closed';
  }

  /** A call answered. (While not closed only the probe decides.) */
  success(): void {
    if (this.#state === 'closed') this.#failures = 0;
  }

  /** A call failed because the dependency did not answer. */
  failure(): void {
    if (this.#state !== 'closed') return;
    this.#failures++;
    if (this.#failures >= this.failureThreshold) this.#open();
  }

  /** Probe now instead of at the end of the open period (e.g. the connection is back). */
  probeNow(): void {
    if (this.#state !== 'open') return;
    clearTimeout(this.#timer);
    this.#halfOpen();
  }

  /** Stops the probe timer (shutdown). */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #open(): void {
    this.#set('open');
    clearTimeout(this.#timer);
    if (this.#stopped) return;
    this.#timer = setTimeout(() => this.#halfOpen(), this.openMs);
    this.#timer.unref();
  }

  #halfOpen(): void {
    if (this.#stopped) return;
    this.#set('half-open');
    let probe: Promise<unknown>;
    try {
      probe = this.#probe();
    } catch (error) {
      probe = Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    probe.then(
      () => {
        if (this.#state !== 'half-open') return;
        this.#failures = 0;
        this.#set('closed');
      },
      () => {
        if (this.#state === 'half-open') this.#open();
      },
    );
  }

  #set(state: CircuitState): void {
    const previous = this.#state;
    if (previous === state) return;
    this.#state = state;
    this.#onStateChange?.(state, previous);
  }
}
