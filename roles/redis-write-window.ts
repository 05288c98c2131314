// Coalesced writes on a Redis connection (ADR 0038): the first command after a quiet
// spell corks the connection's socket and a timer uncorks it `windowMs` later, so the
// commands of the requests that arrive meanwhile reach Redis in one socket write and
// one read of redis-server's, instead of one each. On loopback a socket write cost
// about what the whole HTTP exchange of a bare Fastify request does (bench/README.md),
// and redis-server's share per command halved. The price: a command waits up to
// `windowMs` before it leaves.
//
// Not ioredis' auto-pipelining (ADR 0010): that waits one turn of the event loop and
// builds a Pipeline object per turn; at a moderate rate one turn holds one request, so
// it batched nothing, while a window of a millisecond holds several.
import type { Redis } from 'ioredis';
import { isCluster, type RedisClient } from '../api/records/redis-client.ts';

/** Corks each connection of `client` for `windowMs` after the first command of a spell. */
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
      socket.cork();
      setTimeout(() => {
        open = false;
        socket.uncork();
      }, windowMs);
    }
    return send(...args);
  };
}
