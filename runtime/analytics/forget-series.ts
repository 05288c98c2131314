// Drops, once a minute, the metric series of routes and workflows a process no longer
// serves (GatewayMetrics.forgetGone): the serving roles ask their route table, workers
// the workflow registry. Off the request path; a read that fails skips that minute.
// The same look drops the series of routes idle for a day, served or not
// (GatewayMetrics.forgetIdle), which needs no read.
import type { GatewayMetrics } from './metrics.ts';

/** How often the series of routes and workflows no longer served are looked for. */
const FORGET_SERIES_EVERY_MS = 60_000;
/**
 * How long after its last count a series of a route or workflow no longer served goes
 * (many scrapes see its final counts first; GatewayMetrics.forgetGone).
 */
export const FORGET_SERIES_AFTER_MS = 10 * 60_000;

export interface ServedLabels {
  routes: ReadonlySet<string>;
  workflows: ReadonlySet<string>;
}

/**
 * Starts the minute's look; `served` gives what is served now, or undefined when that
 * is not known yet (a table not loaded). Returns the function that stops it.
 */
export function forgetGoneSeries(
  metrics: GatewayMetrics,
  served: () => ServedLabels | undefined | Promise<ServedLabels | undefined>,
): () => void {
  const timer = setInterval(() => {
    metrics.forgetIdle();
    void (async () => {
      const now = await served();
      if (now) metrics.forgetGone(now, FORGET_SERIES_AFTER_MS);
    })().catch(() => {
      // The store was not readable this minute: the next look tries again.
    });
  }, FORGET_SERIES_EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}
