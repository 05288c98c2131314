// A FIFO to stand for a process's stdout, with a reader that holds it open and reads
// only when the test says so: a log collector that stopped reading, or paused. Linux
// gives a FIFO 64 KiB.
import { execFileSync } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync, readSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sleep } from './eventually.ts';

export interface Fifo {
  /** The write end: a child's stdout (non-blocking when asked, for this process). */
  writer: number;
  /** What is in the FIFO now, without waiting. */
  readNow(): string;
  /** Everything written to the FIFO, once every writer has closed it. */
  readAll(): Promise<string>;
  /** Closes the read end (a writer then gets EPIPE) and removes the FIFO. */
  close(): void;
}

export function openFifo(options: { nonBlockingWriter?: boolean } = {}): Fifo {
  const dir = mkdtempSync(join(tmpdir(), 'hookgate-fifo-'));
  const path = join(dir, 'stdout');
  execFileSync('mkfifo', [path]);
  // The read end first, so that opening the write end does not wait for a reader.
  const reader = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  const writer = openSync(
    path,
    constants.O_WRONLY | (options.nonBlockingWriter ? constants.O_NONBLOCK : 0),
  );
  const buffer = Buffer.alloc(64 * 1024);
  /** One read: bytes, `empty` (a writer is there, nothing to read) or `end`. */
  const readOnce = (): Buffer | 'empty' | 'end' => {
    try {
      const n = readSync(reader, buffer);
      return n === 0 ? 'end' : Buffer.from(buffer.subarray(0, n));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EAGAIN') return 'empty';
      throw err;
    }
  };
  let open = true;
  return {
    writer,
    readNow() {
      const chunks: Buffer[] = [];
      for (let chunk = readOnce(); Buffer.isBuffer(chunk); chunk = readOnce()) chunks.push(chunk);
      return Buffer.concat(chunks).toString();
    },
    async readAll() {
      const chunks: Buffer[] = [];
      for (;;) {
        const chunk = readOnce();
        if (chunk === 'end') return Buffer.concat(chunks).toString();
        if (chunk === 'empty') await sleep(10);
        else chunks.push(chunk);
      }
    },
    close() {
      if (!open) return;
      open = false;
      closeSync(reader);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
