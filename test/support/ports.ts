// Free loopback ports for processes a test starts. They are taken below the kernel's
// ephemeral range (ip_local_port_range): a port picked there and released before the
// process binds it can be reused meanwhile by any outgoing connection on the machine
// (the EADDRINUSE a container once met, test/image/system.test.ts); below the range
// only another listener asking for that very port can take it. Each port is checked by
// binding it, all held at once so they are distinct, then released just before use.
// And none is handed out twice by one test process: two picks made before either
// process binds its port could otherwise draw the same one (a gateway container's admin
// port once was its worker's metrics port: EADDRINUSE, test/image/system.test.ts).
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';

/** Lowest port handed out: above the well-known and most registered service ports. */
const LOWEST = 10_000;

/** The first port of the kernel's ephemeral range (Linux; 32768 elsewhere or unreadable). */
function ephemeralStart(): number {
  try {
    const first = Number(
      readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0],
    );
    return Number.isInteger(first) && first > LOWEST + 1_000 ? first : 32_768;
  } catch {
    return 32_768;
  }
}

const HIGHEST = ephemeralStart() - 1;

/** Binds `port` on loopback: the server, or undefined when it is taken. */
function hold(port: number): Promise<Server | undefined> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(undefined));
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

const release = (servers: Server[]) =>
  Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));

const randomPort = () => LOWEST + Math.floor(Math.random() * (HIGHEST - LOWEST + 1));

/** Ports this process has handed out (never twice). */
const handedOut = new Set<number>();

/** One free loopback port. */
export async function freePort(): Promise<number> {
  return (await freePorts(1))[0] as number;
}

/** `count` distinct free loopback ports. */
export async function freePorts(count: number): Promise<number[]> {
  const servers: Server[] = [];
  try {
    for (let attempt = 0; servers.length < count; attempt++) {
      if (attempt >= count + 200) throw new Error(`no ${count} free ports below ${HIGHEST + 1}`);
      const port = randomPort();
      if (handedOut.has(port)) continue;
      const server = await hold(port);
      if (server) servers.push(server);
    }
    const ports = servers.map((s) => (s.address() as { port: number }).port);
    for (const port of ports) handedOut.add(port);
    return ports;
  } finally {
    await release(servers);
  }
}

/**
 * A base port whose next `count` ports (base, base + 1, ...) are all free now, for
 * tests that give a process consecutive ports. Checked by binding each, then released.
 */
export async function freePortRun(count: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = LOWEST + Math.floor(Math.random() * (HIGHEST - LOWEST + 2 - count));
    const servers: Server[] = [];
    for (let i = 0; i < count; i++) {
      const server = handedOut.has(base + i) ? undefined : await hold(base + i);
      if (!server) break;
      servers.push(server);
    }
    await release(servers);
    if (servers.length === count) {
      for (let i = 0; i < count; i++) handedOut.add(base + i);
      return base;
    }
  }
  throw new Error(`no ${count} consecutive free ports found`);
}
