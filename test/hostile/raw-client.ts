// A raw HTTP/1.1 client for hostile requests: it writes bytes exactly as given (in
// pieces, slowly, or cut off), and reads the first final response off the socket.
import { connect, type Socket } from 'node:net';

export interface Delivery {
  /** whole: one write; pieces: `pieces` writes `delayMs` apart; abort: a prefix, then reset; truncated: a prefix, then wait. */
  kind: 'whole' | 'pieces' | 'abort' | 'truncated';
  pieces: number;
  delayMs: number;
  /** Share of the bytes sent before an abort or a truncation (0..1). */
  cut: number;
}

export interface RawAnswer {
  /** The final status, or undefined when the connection closed without one. */
  status?: number;
  headers: Record<string, string>;
  body: Buffer;
  /** The socket ended or was reset before a whole answer arrived. */
  closedEarly: boolean;
  timedOut: boolean;
  ms: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Parsed {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** Parses the first final (non-1xx) response in `data`, or undefined while incomplete. */
export function parseResponse(data: Buffer, head: boolean): Parsed | undefined {
  let offset = 0;
  for (;;) {
    const end = data.indexOf('\r\n\r\n', offset);
    if (end < 0) return undefined;
    const lines = data.subarray(offset, end).toString('latin1').split('\r\n');
    const status = Number((lines[0] ?? '').split(' ')[1]);
    const headers: Record<string, string> = {};
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      if (colon > 0)
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const bodyStart = end + 4;
    if (status >= 100 && status < 200) {
      offset = bodyStart;
      continue;
    }
    if (head || status === 204 || status === 304) return { status, headers, body: Buffer.alloc(0) };
    const length = headers['content-length'];
    if (length !== undefined) {
      const n = Number(length);
      if (data.length - bodyStart < n) return undefined;
      return { status, headers, body: data.subarray(bodyStart, bodyStart + n) };
    }
    if ((headers['transfer-encoding'] ?? '').includes('chunked')) {
      const body = dechunk(data.subarray(bodyStart));
      return body ? { status, headers, body } : undefined;
    }
    // Neither: the body runs until the connection closes.
    return undefined;
  }
}

function dechunk(data: Buffer): Buffer | undefined {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = data.indexOf('\r\n', at);
    if (eol < 0) return undefined;
    const size = parseInt(data.subarray(at, eol).toString('latin1'), 16);
    if (Number.isNaN(size)) return Buffer.concat(parts);
    if (size === 0) return Buffer.concat(parts);
    if (data.length < eol + 2 + size + 2) return undefined;
    parts.push(data.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
}

/** Sends `bytes` to 127.0.0.1:`port` and waits (at most `timeoutMs`) for the answer. */
export async function rawRequest(
  port: number,
  bytes: Buffer,
  delivery: Delivery,
  options: { head: boolean; timeoutMs: number },
): Promise<RawAnswer> {
  const started = performance.now();
  const socket: Socket = connect({ port, host: '127.0.0.1' });
  socket.setNoDelay(true);
  const chunks: Buffer[] = [];
  let closed = false;
  let aborted = false;
  let finish: () => void = () => undefined;
  const done = new Promise<void>((resolve) => (finish = resolve));
  let parsed: Parsed | undefined;
  socket.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    parsed = parseResponse(Buffer.concat(chunks), options.head);
    if (parsed) finish();
  });
  socket.on('error', () => undefined);
  socket.on('close', () => {
    closed = true;
    // An answer without length or chunking runs until the connection closes.
    if (!parsed && chunks.length > 0) {
      const data = Buffer.concat(chunks);
      const headOnly = parseResponse(data, true);
      if (headOnly) parsed = { ...headOnly, body: data.subarray(data.indexOf('\r\n\r\n') + 4) };
    }
    finish();
  });
  const timer = setTimeout(finish, options.timeoutMs);
  await new Promise<void>((resolve) => socket.once('connect', resolve).once('close', resolve));
  const send = async () => {
    if (closed) return;
    const cutAt = Math.floor(bytes.length * delivery.cut);
    if (delivery.kind === 'whole') {
      socket.write(bytes);
    } else if (delivery.kind === 'pieces') {
      const size = Math.max(1, Math.ceil(bytes.length / delivery.pieces));
      for (let at = 0; at < bytes.length && !closed; at += size) {
        socket.write(bytes.subarray(at, at + size));
        await sleep(delivery.delayMs);
      }
    } else if (delivery.kind === 'abort') {
      socket.write(bytes.subarray(0, cutAt));
      await sleep(delivery.delayMs);
      aborted = true;
      socket.resetAndDestroy();
      finish();
    } else {
      socket.write(bytes.subarray(0, cutAt));
    }
  };
  await send();
  await done;
  clearTimeout(timer);
  const timedOut = !parsed && !closed && !aborted;
  socket.destroy();
  return {
    ...(parsed ? { status: parsed.status } : {}),
    headers: parsed?.headers ?? {},
    body: parsed?.body ?? Buffer.alloc(0),
    closedEarly: !parsed && closed,
    timedOut,
    ms: performance.now() - started,
  };
}
