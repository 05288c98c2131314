// Keeps the consumer label bounded: an allow-list of consumer ids that are always
// recorded as themselves, plus the first N distinct other consumers seen per route;
// every later consumer of that route folds into `other`, a request without one is
// `anonymous`. A route with no request counted for 24 h (the longest analytics window)
// starts again: its consumers are forgotten, and the first N seen from then on are
// themselves. Metrics and the memory store use the same rule, each on its own copy
// over the same requests, so both give a request the same label (docs/analytics.md,
// "Consumers").
import { ANONYMOUS_CONSUMER, MAX_WINDOW_MINUTES, OTHER_CONSUMER } from './definitions.ts';

export interface ConsumerLabelOptions {
  /** Consumer ids always recorded as themselves (not counted against the cap). */
  allow?: readonly string[];
  /** Distinct consumers per route recorded as themselves before folding; default 20. */
  maxPerRoute?: number;
}

export const DEFAULT_MAX_CONSUMERS_PER_ROUTE = 20;
/** Longest consumer id kept as a label value; longer ones fold into `other`. */
const MAX_CONSUMER_LENGTH = 128;
/**
 * Minutes without a request counted on a route after which it starts again: the
 * longest window, so no window still holds a request labelled from before.
 */
export const ROUTE_IDLE_MINUTES = MAX_WINDOW_MINUTES;

const MINUTE_MS = 60_000;

/** The minute (since the epoch) a request is counted in: the one it finished in. */
export function countedMinute(o: { at: number; durationSeconds: number }): number {
  return Math.floor((o.at + o.durationSeconds * 1000) / MINUTE_MS);
}

interface RouteConsumers {
  /** Consumers recorded as themselves on the route since it last started. */
  seen: Set<string>;
  /** Newest minute a request on the route was counted in. */
  lastMinute: number;
}

export class ConsumerLabels {
  readonly #allow: ReadonlySet<string>;
  readonly #max: number;
  readonly #routes = new Map<string, RouteConsumers>();
  readonly #onRestart: ((route: string) => void) | undefined;

  /**
   * `onRestart` is told a route starts again (idle for ROUTE_IDLE_MINUTES), before the
   * first label of its new start is given: what was recorded under its old labels must
   * go then, or the new ones would add to them.
   */
  constructor(options: ConsumerLabelOptions = {}, onRestart?: (route: string) => void) {
    this.#allow = new Set(options.allow ?? []);
    this.#max = options.maxPerRoute ?? DEFAULT_MAX_CONSUMERS_PER_ROUTE;
    this.#onRestart = onRestart;
  }

  /**
   * The label value to record for this consumer on this route, for a request counted
   * in `minute` (countedMinute). Every request counts as the route's activity,
   * anonymous and allow-listed ones too.
   */
  label(route: string, consumer: string | undefined, minute: number): string {
    const consumers = this.#touch(route, minute);
    if (consumer === undefined || consumer === '') return ANONYMOUS_CONSUMER;
    if (this.#allow.has(consumer)) return consumer;
    if (
      consumer.length > MAX_CONSUMER_LENGTH ||
      consumer === OTHER_CONSUMER ||
      consumer === ANONYMOUS_CONSUMER
    ) {
      return OTHER_CONSUMER;
    }
    const { seen } = consumers;
    if (seen.has(consumer)) return consumer;
    if (seen.size >= this.#max) return OTHER_CONSUMER;
    seen.add(consumer);
    return consumer;
  }

  /**
   * Forgets the routes with no request counted in the ROUTE_IDLE_MINUTES up to `minute`
   * (telling `onRestart`), as their next request would: a deleted trigger's consumers
   * go a day after its last request instead of staying for good.
   */
  forgetIdle(minute: number): void {
    for (const [route, consumers] of this.#routes) {
      if (minute - consumers.lastMinute >= ROUTE_IDLE_MINUTES) this.#restart(route);
    }
  }

  #touch(route: string, minute: number): RouteConsumers {
    let consumers = this.#routes.get(route);
    if (consumers && minute - consumers.lastMinute >= ROUTE_IDLE_MINUTES) {
      this.#restart(route);
      consumers = undefined;
    }
    if (!consumers) {
      consumers = { seen: new Set(), lastMinute: minute };
      this.#routes.set(route, consumers);
    } else if (minute > consumers.lastMinute) {
      consumers.lastMinute = minute;
    }
    return consumers;
  }

  #restart(route: string): void {
    this.#routes.delete(route);
    this.#onRestart?.(route);
  }
}
