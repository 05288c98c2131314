// A small SSE client for tests: reads frames from a fetch response.
export interface SseFrame {
  id?: string;
  event: string;
  data: string;
}

export async function* sseFrames(res: Response, signal?: AbortSignal): AsyncGenerator<SseFrame> {
  if (!res.body) return;
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for (;;) {
      if (signal?.aborted) return;
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const frame: SseFrame = { event: 'message', data: '' };
        let hasData = false;
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) continue;
          const [field, ...rest] = line.split(':');
          const value = rest.join(':').replace(/^ /, '');
          if (field === 'id') frame.id = value;
          else if (field === 'event') frame.event = value;
          else if (field === 'data') {
            frame.data += (hasData ? '\n' : '') + value;
            hasData = true;
          }
        }
        if (hasData) yield frame;
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

/** Collect frames until `until` returns true for one (included) or the stream ends. */
export async function collect(
  res: Response,
  until: (f: SseFrame) => boolean = () => false,
): Promise<SseFrame[]> {
  const frames: SseFrame[] = [];
  for await (const f of sseFrames(res)) {
    frames.push(f);
    if (until(f)) break;
  }
  return frames;
}
