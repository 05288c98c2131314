// Memory of a child Node process as its own heap sees it, through the V8 inspector
// (the child is started with --inspect=127.0.0.1:<port>). Resident memory (VmRSS) says
// what the operating system gave the process and has not taken back: V8 keeps heap
// pages it grew for a burst and malloc keeps freed arenas, so RSS after a second burst
// says little about retention. What the heap holds after a full collection does: a
// second burst as large as the first must leave it where the first did.

export type MemoryUsage = {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
};

type Reply = { id: number; result?: { result?: { value?: unknown } }; error?: unknown };

async function debuggerUrl(port: number): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${port}/json/list`);
  const targets = (await res.json()) as { webSocketDebuggerUrl: string }[];
  const url = targets[0]?.webSocketDebuggerUrl;
  if (!url) throw new Error(`no inspector target on port ${port}`);
  return url;
}

/**
 * Forces full garbage collections in the process whose inspector listens on `port`,
 * then reads its process.memoryUsage(). Retained bytes = heapUsed + external (external
 * includes the array buffers: request and response bodies held as Buffers).
 */
export async function memoryAfterGc(port: number): Promise<MemoryUsage & { retained: number }> {
  const socket = new WebSocket(await debuggerUrl(port));
  await new Promise<void>((resolve, reject) => {
    socket.addEventListener('open', () => resolve(), { once: true });
    socket.addEventListener('error', () => reject(new Error('inspector socket failed')), {
      once: true,
    });
  });
  let next = 0;
  const pending = new Map<number, (reply: Reply) => void>();
  socket.addEventListener('message', (event) => {
    const reply = JSON.parse(String(event.data)) as Reply;
    pending.get(reply.id)?.(reply);
    pending.delete(reply.id);
  });
  const call = (method: string, params: Record<string, unknown> = {}): Promise<Reply> =>
    new Promise((resolve, reject) => {
      const id = ++next;
      const timer = setTimeout(() => reject(new Error(`${method}: no answer in 60 s`)), 60_000);
      pending.set(id, (reply) => {
        clearTimeout(timer);
        if (reply.error) reject(new Error(`${method}: ${JSON.stringify(reply.error)}`));
        else resolve(reply);
      });
      socket.send(JSON.stringify({ id, method, params }));
    });
  try {
    // Twice: the first collection runs finalizers (sockets, zlib) whose memory the
    // second one frees.
    await call('HeapProfiler.collectGarbage');
    await call('HeapProfiler.collectGarbage');
    const reply = await call('Runtime.evaluate', {
      expression: 'JSON.stringify(process.memoryUsage())',
      returnByValue: true,
    });
    const usage = JSON.parse(String(reply.result?.result?.value)) as MemoryUsage;
    return { ...usage, retained: usage.heapUsed + usage.external };
  } finally {
    socket.close();
  }
}
