// The callbacks an engine has sent off and not yet seen delivered (or given up on):
// each is reported to the observer, a failure to the internal error handler, and
// shutdown can wait for them or cancel them.
import type { CallbackSender, DeliveryResult } from './callbacks.ts';
import type { Execution } from './ports.ts';

export interface CallbackDeliveriesOptions {
  sender: CallbackSender;
  /** Told about every delivery, delivered or not (metrics). */
  delivered?: (result: DeliveryResult) => void;
  onInternalError: (error: unknown, where: string) => void;
}

export class CallbackDeliveries {
  readonly #o: CallbackDeliveriesOptions;
  readonly #pending = new Set<Promise<void>>();
  readonly #abort = new AbortController();

  constructor(options: CallbackDeliveriesOptions) {
    this.#o = options;
  }

  /** Deliveries under way. */
  get pending(): Iterable<Promise<void>> {
    return this.#pending;
  }

  /** Posts the finished execution to `url` in the background. */
  deliver(execution: Execution, url: string): void {
    const delivery = this.#o.sender
      .deliver(url, execution, { signal: this.#abort.signal })
      .then(
        (result) => {
          this.#o.delivered?.(result);
          if (!result.delivered) {
            this.#o.onInternalError(
              new Error(`callback to ${url} not delivered: ${result.reason}`),
              `callback ${execution.id} (${execution.workflowId})`,
            );
          }
        },
        (error: unknown) => this.#o.onInternalError(error, 'callback'),
      )
      .finally(() => this.#pending.delete(delivery));
    this.#pending.add(delivery);
  }

  /** Cancels the deliveries under way (waits and outbound requests end at once). */
  abort(reason: Error): void {
    this.#abort.abort(reason);
  }
}
