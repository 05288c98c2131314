// A TCP proxy on loopback that injects network faults between a client and a server
// (acceptance rule E5): added latency in both directions, a blackhole (connections stay
// open and nothing gets through; what was sent is held, as TCP would keep retransmitting
// it, and arrives once the hole closes), and resets (every connection, open or new, is
// reset). The mode can change while connections are open, as a network fault would.
import net from 'node:net';
import type { AddressInfo } from 'node:net';

export type FaultMode =
  { kind: 'pass' } | { kind: 'latency'; ms: number } | { kind: 'blackhole' } | { kind: 'reset' };

export interface FaultProxy {
  port: number;
  set(mode: FaultMode): void;
  close(): Promise<void>;
}

export async function startFaultProxy(target: {
  host?: string;
  port: number;
}): Promise<FaultProxy> {
  let mode: FaultMode = { kind: 'pass' };
  const pairs = new Set<[net.Socket, net.Socket]>();
  const timers = new Set<NodeJS.Timeout>();

  /** Chunks held by the blackhole, per destination socket, in order. */
  const held = new Map<net.Socket, Buffer[]>();
  const deliver = (to: net.Socket, chunk: Buffer) => {
    if (mode.kind === 'blackhole') {
      held.set(to, [...(held.get(to) ?? []), chunk]);
      return;
    }
    if (mode.kind === 'reset') return;
    if (mode.kind === 'pass') {
      if (!to.destroyed) to.write(chunk);
      return;
    }
    const timer = setTimeout(() => {
      timers.delete(timer);
      if (!to.destroyed) to.write(chunk);
    }, mode.ms);
    timers.add(timer);
  };
  /** Copies `from` to `to` as the mode says, chunk by chunk. */
  const relay = (from: net.Socket, to: net.Socket) => {
    from.on('data', (chunk: Buffer) => deliver(to, chunk));
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
      held.delete(client);
      held.delete(upstream);
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
        held.clear();
        for (const [client, upstream] of pairs) {
          client.resetAndDestroy();
          upstream.destroy();
        }
        pairs.clear();
        return;
      }
      if (next.kind === 'blackhole') return;
      const waiting = [...held];
      held.clear();
      for (const [to, chunks] of waiting) for (const chunk of chunks) deliver(to, chunk);
    },
    async close() {
      for (const timer of timers) clearTimeout(timer);
      for (const [client, upstream] of pairs) {
        client.destroy();
        upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
