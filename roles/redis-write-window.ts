// Coalesced writes on a Redis connection (ADR 0038): the first command after a quiet
// spell leaves at once and corks the connection's socket behind it; a timer uncorks it
// `windowMs` later, so the commands that come meanwhile reach Redis in one socket write
// and one read of redis-server's, instead of one each. On loopback a socket write cost
// about what the whole HTTP exchange of a bare Fastify request does (bench/README.md),
// and redis-server's share per command halved. The price: a command that comes within
// `windowMs` of another waits for the window's end; one on a quiet connection does not.
//
// Not ioredis' auto-pipelining (ADR 0010): that waits one turn of the event loop and
// builds a Pipeline object per turn; at a moderate rate one turn holds one request, so
// it batched nothing, while a window of a millisecond holds several.
import type { Redis } from 'ioredis';
import { isCluster, type RedisClient } from '../api/records/redis-client.ts';

/** Corks each connection of `client` for `windowMs` behind the first command of a spell. */
export function coalesceWrites(client: RedisClient, windowMs: number): void {
  if (windowMs <= 0) return;
  if (!isCluster(client)) {
    windowed(client, windowMs);
    return;
  }
  for (const node of client.nodes()) windowed(node, windowMs);
  client.on('+node', (node: Redis) => windowed(node, windowMs));
}

const WINDOWED = Symbol('hookgate write window');

function windowed(connection: Redis, windowMs: number): void {
  const marked = connection as Redis & { [WINDOWED]?: true };
  if (marked[WINDOWED]) return;
  marked[WINDOWED] = true;
  const send = connection.sendCommand.bind(connection);
  let open = false;
  connection.sendCommand = (...args: Parameters<Redis['sendCommand']>) => {
    // Only a connection that is ready writes at once (else ioredis queues the command
    // and writes it on connect); a socket ended meanwhile ignores the uncork.
    const socket: Redis['stream'] | undefined = connection.stream;
    if (!open && connection.status === 'ready' && socket && !socket.writableCorked) {
      open = true;
      // Written now (a ready connection writes synchronously), then the window, which
      // closes by its timer even if the write threw.
      try {
        return send(...args);
      } finally {
        socket.cork();
        setTimeout(() => {
          open = false;
          socket.uncork();
        }, windowMs);
      }
    }
    return send(...args);
  };
}
