// The callbacks an engine has sent off and not yet seen delivered (or given up on):
// each is reported to the observer (metrics) and its outcome kept on the execution;
// an error of our own goes to the internal error handler; shutdown can wait for them
// or cancel them.
import type { CallbackSender, DeliveryResult } from './callbacks.ts';
import type { WorkflowPolicySource } from './outbound/guard.ts';
import type { CallbackOutcome, Execution } from './ports.ts';

export interface CallbackDeliveriesOptions {
  sender: CallbackSender;
  /** Told about every delivery, delivered or not (metrics). */
  delivered?: (result: DeliveryResult) => void;
  /** Keeps the outcome with the execution (it is already saved; save it again). */
  record?: (execution: Execution) => Promise<void>;
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

  /**
   * Posts the finished execution to `url` in the background, under `workflow`'s policy,
   * signed with `secrets` when the trigger has its own.
   */
  deliver(
    execution: Execution,
    url: string,
    workflow?: WorkflowPolicySource,
    secrets?: readonly string[],
  ): void {
    const delivery = this.#o.sender
      .deliver(url, execution, {
        signal: this.#abort.signal,
        ...(workflow ? { workflow } : {}),
        secrets,
      })
      .then(async (result) => {
        this.#o.delivered?.(result);
        execution.callback = outcomeOf(result);
        await this.#o.record?.(execution);
        // Not delivered is no internal error: the receiver refused or was away, or the
        // outbound policy refused it. The outcome is on the record and in
        // hookgate_callback_deliveries_total; a log line per failure (with a URL that
        // may hold the receiver's token) let any caller fill the error log.
      })
      .catch((error: unknown) => this.#o.onInternalError(error, 'callback'))
      .finally(() => this.#pending.delete(delivery));
    this.#pending.add(delivery);
  }

  /** Cancels the deliveries under way (waits and outbound requests end at once). */
  abort(reason: Error): void {
    this.#abort.abort(reason);
  }
}

function outcomeOf(result: DeliveryResult): CallbackOutcome {
  return {
    delivered: result.delivered,
    attempts: result.attempts,
    ...(result.status !== undefined ? { status: result.status } : {}),
    ...(result.reason !== undefined ? { reason: result.reason } : {}),
    ...(result.refused ? { code: 'HG_ERR_OUTBOUND_REFUSED' as const } : {}),
  };
}
