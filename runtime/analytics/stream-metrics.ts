// The open event streams of a process and the streams their caps refused (sse.ts,
// StreamSlots), read at every scrape from the plain numbers ProcessStreams keeps:
//   hookgate_streams_open{listener}              slots held now (webhook, admin)
//   hookgate_streams_max                         the process's cap (HOOKGATE_STREAMS_PER_PROCESS)
//   hookgate_streams_refused_total{listener,cap} 429 execution-streams-exceeded (cap
//                                                "execution"), 503 streams-exhausted ("process")
// Every series exists from the first scrape (at 0), so that a rate over it is defined.
import { Counter, Gauge, type Registry } from 'prom-client';
import { STREAM_CAPS, STREAM_LISTENERS, type ProcessStreams } from '../gateway/sse.ts';

export const STREAM_METRIC = {
  open: 'hookgate_streams_open',
  max: 'hookgate_streams_max',
  refused: 'hookgate_streams_refused_total',
} as const;

export function streamMetrics(registry: Registry, streams: ProcessStreams): void {
  const registers = [registry];
  new Gauge({
    name: STREAM_METRIC.open,
    help: 'Event streams open in this process (SSE Stream answers, execution channels, live endpoint streams), by listener; each holds a slot of hookgate_streams_max until its last bytes have left.',
    labelNames: ['listener'],
    registers,
    collect(this: Gauge<'listener'>) {
      for (const listener of STREAM_LISTENERS) this.set({ listener }, streams.openOn[listener]);
    },
  });
  new Gauge({
    name: STREAM_METRIC.max,
    help: 'Event streams this process opens at most, both listeners counted (HOOKGATE_STREAMS_PER_PROCESS); the next is refused 503 streams-exhausted.',
    registers,
    collect(this: Gauge) {
      this.set(streams.max);
    },
  });
  const seen = {
    webhook: { execution: 0, process: 0 },
    admin: { execution: 0, process: 0 },
  };
  const refused = new Counter({
    name: STREAM_METRIC.refused,
    help: 'Event streams refused by a cap, by listener and cap: execution (429 execution-streams-exceeded, the execution has its streams open on that listener), process (503 streams-exhausted, the process has its streams open).',
    labelNames: ['listener', 'cap'],
    registers,
    collect(this: Counter<'listener' | 'cap'>) {
      for (const listener of STREAM_LISTENERS) {
        for (const cap of STREAM_CAPS) {
          const added = streams.refused[listener][cap] - seen[listener][cap];
          if (added > 0) this.inc({ listener, cap }, added);
          seen[listener][cap] = streams.refused[listener][cap];
        }
      }
    },
  });
  for (const listener of STREAM_LISTENERS)
    for (const cap of STREAM_CAPS) refused.inc({ listener, cap }, 0);
}
