// The callbacks an engine has sent off and not yet seen delivered (or given up on):
// each is reported to the observer (metrics) and its outcome kept on the execution;
// an error of our own goes to the internal error handler; shutdown can wait for them
// or cancel them. With a route reader, each attempt signs with the secrets the
// trigger's route record holds at that attempt, when the route is still the trigger's
// (its uid the run's: ADR 0035).
import type { RouteRecord } from '../../api/records/records.ts';
import type { AttemptSecrets, CallbackSender, DeliveryResult } from './callbacks.ts';
import type { CallbackOutcome, Execution, StartRequest, TriggerRef } from './ports.ts';
import { callbackSecretsOf } from './trigger-ref.ts';
import type { TraceSpan } from '../tracing/tracing.ts';

/** Reads a trigger's route record by trigger key, as it is now (a cached reader). */
export interface RouteReader {
  get(key: string): Promise<RouteRecord | undefined>;
}

export interface CallbackDeliveriesOptions {
  sender: CallbackSender;
  /**
   * Where each attempt reads the trigger's signing secrets (its route record). Without
   * it, the secrets the start request carried sign every attempt.
   */
  routes?: RouteReader;
  /** Told about every delivery, delivered or not (metrics). */
  delivered?: (result: DeliveryResult) => void;
  /**
   * Keeps the outcome with the execution (it is already saved; save it again, or, for a
   * workflow that discards its succeeded executions' records, remove it once delivered).
   */
  record?: (
    execution: Execution,
    request: Pick<StartRequest, 'workflow' | 'keepRecord' | 'idempotencyWindowMs'>,
  ) => Promise<void>;
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
   * Posts the finished execution to `url` in the background, under the policy of the
   * request's workflow, signed with its trigger's secrets: as its route record holds them
   * at each attempt, or (no route reader) those the request carried.
   */
  deliver(
    execution: Execution,
    url: string,
    request: Pick<
      StartRequest,
      'workflow' | 'trigger' | 'callbackSecrets' | 'keepRecord' | 'idempotencyWindowMs'
    >,
    span?: TraceSpan,
  ): void {
    const { routes } = this.#o;
    const trigger = request.trigger;
    const own = (request.callbackSecrets?.length ?? 0) > 0;
    const delivery = this.#o.sender
      .deliver(url, execution, {
        signal: this.#abort.signal,
        workflow: request.workflow,
        secrets: routes ? () => this.#secretsOf(routes, trigger, own) : request.callbackSecrets,
        span,
      })
      .then(async (result) => {
        this.#o.delivered?.(result);
        execution.callback = outcomeOf(result);
        await this.#o.record?.(execution, request);
        // Not delivered is no internal error: the receiver refused or was away, or the
        // outbound policy refused it. The outcome is on the record and in
        // hookgate_callback_deliveries_total; a log line per failure (with a URL that
        // may hold the receiver's token) let any caller fill the error log.
      })
      .catch((error: unknown) => this.#o.onInternalError(error, 'callback'))
      .finally(() => this.#pending.delete(delivery));
    this.#pending.add(delivery);
  }

  /**
   * The trigger's signing secrets now. A route gone or unreadable, or another trigger's
   * (deleted and re-created under the name: another uid), signs nothing when the run
   * started with secrets of the trigger's own (ADR 0035: not with a key nobody manages
   * any more, nor another trigger's, nor the process's instead); a run that started
   * without signs with the engine's, as it always did (an empty list).
   */
  async #secretsOf(
    routes: RouteReader,
    trigger: Pick<TriggerRef, 'key' | 'uid'>,
    own: boolean,
  ): Promise<AttemptSecrets> {
    let route: RouteRecord | undefined;
    try {
      route = await routes.get(trigger.key);
    } catch (error) {
      // Ours (the store), not the receiver's: reported either way.
      this.#o.onInternalError(error, 'reading the route of a callback');
      return own ? { unsigned: `the route of endpoint ${trigger.key} could not be read` } : [];
    }
    const secrets = callbackSecretsOf(trigger, route);
    return own || !('unsigned' in secrets) ? secrets : [];
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
