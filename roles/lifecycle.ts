// The one shutdown path of every role. SIGTERM or SIGINT (or an uncaught error) runs
// the role's `close()` once: each role stops taking work, drains what runs (listeners
// refuse new connections, answer with Connection: close and end idle keep-alive
// connections with a FIN, never a reset: runtime/graceful-close.ts; workers finish their jobs; the
// operator drains reconciles and releases its Lease), then releases its connections.
// The process exits 0 when that finishes and its log lines are written (or stdout has
// taken nothing for 5 s, HOOKGATE_LOG_STALL_MS), 1 after an error or when the grace
// period runs out, and at once on a second signal. The chart gives each pod its preStop
// sleep, this grace period and 5 s more as terminationGracePeriodSeconds (the gateway
// 35 s), and refuses less than the preStop sleep, 25 s and the forced exit's write of
// its last log lines (HOOKGATE_LOG_SYNC_FLUSH_MS, in whole seconds).
import closeWithGrace from 'close-with-grace';
import type { Logger } from 'pino';

export const SHUTDOWN_GRACE_MS = 25_000;

export interface Closable {
  close(): Promise<void>;
}

export function closeOnSignal(
  role: Closable,
  logger: Logger,
  graceMs: number = SHUTDOWN_GRACE_MS,
): void {
  closeWithGrace(
    {
      delay: graceMs,
      logger: {
        error: (message: unknown) => {
          logger.error(message instanceof Error ? { err: message } : {}, String(message));
        },
      },
    },
    async ({ signal, err }) => {
      if (err) logger.error({ err }, 'shutting down after an error');
      else logger.info({ signal }, 'shutting down');
      await role.close();
      logger.info('stopped');
      // Until stdout has taken every line, or has taken nothing for HOOKGATE_LOG_STALL_MS:
      // a stdout nobody reads must not hold the exit (roles/log-destination.ts).
      await new Promise<void>((resolve) => logger.flush(() => resolve()));
    },
  );
}
