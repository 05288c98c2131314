// Keeps the consumer label bounded: an allow-list of consumer ids that are always
// recorded as themselves, plus the first N distinct other consumers seen per route;
// every later consumer of that route folds into `other`, a request without one is
// `anonymous`. Metrics and the memory store use the same rule.
import { ANONYMOUS_CONSUMER, OTHER_CONSUMER } from './definitions.ts';

export interface ConsumerLabelOptions {
  /** Consumer ids always recorded as themselves (not counted against the cap). */
  allow?: readonly string[];
  /** Distinct consumers per route recorded as themselves before folding; default 20. */
  maxPerRoute?: number;
}

export const DEFAULT_MAX_CONSUMERS_PER_ROUTE = 20;
/** Longest consumer id kept as a label value; longer ones fold into `other`. */
const MAX_CONSUMER_LENGTH = 128;

export class ConsumerLabels {
  readonly #allow: ReadonlySet<string>;
  readonly #max: number;
  readonly #seen = new Map<string, Set<string>>();

  constructor(options: ConsumerLabelOptions = {}) {
    this.#allow = new Set(options.allow ?? []);
    this.#max = options.maxPerRoute ?? DEFAULT_MAX_CONSUMERS_PER_ROUTE;
  }

  /** Forgets the consumers seen on a route that is served no more. */
  forgetRoute(route: string): void {
    this.#seen.delete(route);
  }

  /** The label value to record for this consumer on this route. */
  label(route: string, consumer: string | undefined): string {
    if (consumer === undefined || consumer === '') return ANONYMOUS_CONSUMER;
    if (this.#allow.has(consumer)) return consumer;
    if (
      consumer.length > MAX_CONSUMER_LENGTH ||
      consumer === OTHER_CONSUMER ||
      consumer === ANONYMOUS_CONSUMER
    ) {
      return OTHER_CONSUMER;
    }
    let seen = this.#seen.get(route);
    if (!seen) {
      seen = new Set();
      this.#seen.set(route, seen);
    }
    if (seen.has(consumer)) return consumer;
    if (seen.size >= this.#max) return OTHER_CONSUMER;
    seen.add(consumer);
    return consumer;
  }
}
