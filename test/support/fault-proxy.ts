// A TCP proxy on loopback that injects network faults between a client and a server
// (acceptance rule E5): added latency in both directions, a blackhole (connections stay
// open and nothing gets through; what was sent is held, as TCP would keep retransmitting
// it, and arrives once the hole closes), and resets (every connection, open or new, is
// reset). The mode can change while connections are open, as a network fault would.
// Each direction of a connection is one FIFO lane: a chunk is due at the later of its
// arrival plus the latency and the chunk before it, and goes out only when the mode in
// force then lets it, so bytes never overtake one another (as on one TCP stream).
import net from 'node:net';
import type { AddressInfo } from 'node:net';

export type FaultMode =
  { kind: 'pass' } | { kind: 'latency'; ms: number } | { kind: 'blackhole' } | { kind: 'reset' };

export interface FaultProxy {
  port: number;
  set(mode: FaultMode): void;
  close(): Promise<void>;
}

/** One direction of one connection: what is on its way to `to`, in order. */
interface Lane {
  to: net.Socket;
  queue: { chunk: Buffer; due: number }[];
  timer: NodeJS.Timeout | undefined;
}

export async function startFaultProxy(target: {
  host?: string;
  port: number;
}): Promise<FaultProxy> {
  let mode: FaultMode = { kind: 'pass' };
  const pairs = new Set<[net.Socket, net.Socket]>();
  const lanes = new Set<Lane>();

  /** Sends what is due, unless the mode holds it; wakes up for the next chunk. */
  const drain = (lane: Lane) => {
    if (lane.timer) clearTimeout(lane.timer);
    lane.timer = undefined;
    if (mode.kind === 'blackhole' || mode.kind === 'reset') return;
    const now = performance.now();
    while (lane.queue.length > 0 && (lane.queue[0]?.due ?? Infinity) <= now) {
      const { chunk } = lane.queue.shift() as { chunk: Buffer };
      if (!lane.to.destroyed) lane.to.write(chunk);
    }
    const next = lane.queue[0];
    if (next) lane.timer = setTimeout(() => drain(lane), next.due - now);
  };

  /** Copies `from` to `to` through a lane of its own. */
  const relay = (from: net.Socket, to: net.Socket) => {
    const lane: Lane = { to, queue: [], timer: undefined };
    lanes.add(lane);
    from.on('data', (chunk: Buffer) => {
      if (mode.kind === 'reset') return;
      const delay = mode.kind === 'latency' ? mode.ms : 0;
      const after = lane.queue.at(-1)?.due ?? 0;
      lane.queue.push({ chunk, due: Math.max(performance.now() + delay, after) });
      drain(lane);
    });
    to.once('close', () => {
      if (lane.timer) clearTimeout(lane.timer);
      lanes.delete(lane);
    });
  };

  const server = net.createServer((client) => {
    if (mode.kind === 'reset') {
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(target.port, target.host ?? '127.0.0.1');
    const pair: [net.Socket, net.Socket] = [client, upstream];
    pairs.add(pair);
    const end = () => {
      pairs.delete(pair);
      if (!client.destroyed) client.destroy();
      if (!upstream.destroyed) upstream.destroy();
    };
    for (const socket of pair) {
      socket.on('error', end);
      socket.on('close', end);
    }
    relay(client, upstream);
    relay(upstream, client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));

  return {
    port: (server.address() as AddressInfo).port,
    set(next) {
      mode = next;
      if (next.kind === 'reset') {
        for (const lane of lanes) {
          if (lane.timer) clearTimeout(lane.timer);
          lane.queue = [];
        }
        for (const [client, upstream] of pairs) {
          client.resetAndDestroy();
          upstream.destroy();
        }
        pairs.clear();
        return;
      }
      for (const lane of lanes) drain(lane);
    },
    async close() {
      for (const lane of lanes) if (lane.timer) clearTimeout(lane.timer);
      for (const [client, upstream] of pairs) {
        client.destroy();
        upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
