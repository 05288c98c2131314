// A local HTTP receiver for outbound tests: records requests, answers from a script.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface Answer {
  status: number;
  headers?: Record<string, string | undefined>;
  body?: string;
  hangMs?: number;
}

/** The answer to a request; a promise holds the response until it settles. */
export type Reply = (req: Received, index: number) => Answer | Promise<Answer>;

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  close: () => Promise<void>;
}

export async function startReceiver(reply: Reply = () => ({ status: 200 })): Promise<Receiver> {
  const received: Received[] = [];
  const timers = new Set<NodeJS.Timeout>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const entry: Received = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      received.push(entry);
      void Promise.resolve(reply(entry, received.length - 1)).then((answer) => {
        const send = (): void => {
          if (res.destroyed) return;
          const headers = Object.entries(answer.headers ?? {}).filter(
            (h): h is [string, string] => h[1] !== undefined,
          );
          res.writeHead(answer.status, Object.fromEntries(headers));
          res.end(answer.body ?? '');
        };
        if (answer.hangMs) {
          const t = setTimeout(() => {
            timers.delete(t);
            send();
          }, answer.hangMs);
          timers.add(t);
        } else send();
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    received,
    close: async () => {
      for (const t of timers) clearTimeout(t);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
