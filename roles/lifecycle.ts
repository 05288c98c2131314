// Listening and graceful shutdown for any role: SIGTERM/SIGINT stop new requests
// (503 with Connection: close), let running ones finish, then release the rest.
import closeWithGrace from 'close-with-grace';
import type { FastifyInstance } from 'fastify';

export interface ServeOptions {
  port: number;
  host: string;
  /** Bounded below Kubernetes' 30 s terminationGracePeriodSeconds. */
  graceMs?: number;
  onClose: () => Promise<void>;
}

export async function serve(app: FastifyInstance, options: ServeOptions): Promise<string> {
  const address = await app.listen({ port: options.port, host: options.host });
  closeWithGrace({ delay: options.graceMs ?? 25_000 }, async ({ signal, err }) => {
    if (err) app.log.error({ err }, 'shutting down after an error');
    else app.log.info({ signal }, 'shutting down');
    await options.onClose();
  });
  return address;
}
