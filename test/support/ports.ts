// Free loopback ports for processes a test starts: each one bound by the kernel (port
// 0) and released just before use, all held at once so the ports are distinct.
import { createServer, type Server } from 'node:net';

/** One free loopback port. */
export async function freePort(): Promise<number> {
  return (await freePorts(1))[0] as number;
}

export async function freePorts(count: number): Promise<number[]> {
  const servers: Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < count; i++) {
      const server = createServer();
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, '127.0.0.1', resolve);
      });
      ports.push((server.address() as { port: number }).port);
    }
    return ports;
  } finally {
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  }
}

/**
 * A base port whose next `count` ports (base, base + 1, ...) are all free now, for
 * tests that give a process consecutive ports. Checked by binding each, then released.
 */
export async function freePortRun(count: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * 20_000);
    const servers: Server[] = [];
    let ok = true;
    for (let i = 0; i < count && ok; i++) {
      const server = createServer();
      ok = await new Promise<boolean>((resolve) => {
        server.once('error', () => resolve(false));
        server.listen(base + i, '127.0.0.1', () => resolve(true));
      });
      if (ok) servers.push(server);
    }
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
    if (ok) return base;
  }
  throw new Error(`no ${count} consecutive free ports found`);
}
