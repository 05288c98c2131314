// hookgate events <trigger>: tail the live SSE stream of one endpoint (the admin
// listener's /webhook-events/<workflowId>/<pathSegment>): each request and response
// as it happens, one line each (or NDJSON with -o json). Ends on Ctrl-C, or after
// --count request/response events, or after --timeout. --request-timeout bounds the
// wait for the stream to open and then for each next byte (the server's heartbeat
// comes every 15 s), never the whole stream: a silent one is a server or network gone.
import { parseServerCommand, outputFormat, positionalsUpTo } from '../command.ts';
import { AdminClient, parseTriggerRef, problemError, serverHelp } from '../admin-client.ts';
import { durationMs, formatDuration } from '../durations.ts';
import { CliError, EXIT, usageError, type ExitCode } from '../errors.ts';

export const EVENTS_HELP = `Usage: hookgate events <namespace>/<name> [options]

Tails the live event stream of a deployed trigger: one line per request and response
(headers redacted by the server), until interrupted.

Options:
  -n, --namespace <ns>      namespace when the trigger is given by name (default: default)
  -o, --output <text|json>  text lines (default) or one JSON object per line
  -c, --count <n>           stop after n request/response events
      --timeout <duration>  stop after this long (exit 0), e.g. 10m, or seconds
${serverHelp(`give up (exit 3) when the stream has not opened, or has sent
                       nothing (no event, no heartbeat: the server sends one every
                       15 s), within this, e.g. 30s or 2m (default 30s; 0: never)`)}

Exit codes: 0 ended (interrupted, --count or --timeout reached), 1 refused or not
deployed, 2 bad usage, 3 server unreachable, silent for --request-timeout, or the
stream broke or was closed by the server (no reconnect).`;

interface SseFrame {
  event: string;
  data: string;
}

/**
 * Frames of an SSE body, as they arrive. `arrived` is told of every chunk, comments
 * (the heartbeat) too, which yield no frame.
 */
async function* frames(
  body: ReadableStream<Uint8Array>,
  arrived: () => void,
): AsyncGenerator<SseFrame> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of body) {
    arrived();
    buffer += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, '');
      let event = 'message';
      const data: string[] = [];
      for (const line of block.split(/\r?\n/)) {
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') event = value;
        else if (field === 'data') data.push(value);
      }
      if (data.length > 0 || event !== 'message') yield { event, data: data.join('\n') };
    }
  }
}

/**
 * The route as `get triggers` and the dashboard write it (`:name` parameters), from the
 * OpenAPI document's path (`{name}`).
 */
export function routePath(openApiPath: string): string {
  return openApiPath.replace(/\{([^}]+)\}/g, ':$1');
}

/** One line per event: time, kind, method and path, status and latency. */
export function eventLine(frame: SseFrame): string {
  let d: Record<string, unknown>;
  try {
    d = JSON.parse(frame.data) as Record<string, unknown>;
  } catch {
    return `${frame.event} ${frame.data}`;
  }
  const s = (v: unknown) => (typeof v === 'string' || typeof v === 'number' ? String(v) : '');
  const at = s(d.at) || new Date().toISOString();
  if (frame.event === 'request')
    return `${at} request  ${s(d.method)} ${s(d.path)}${d.query ? `?${s(d.query)}` : ''} id=${s(d.requestId)}`;
  if (frame.event === 'response') {
    const extra = [
      d.executionId ? `execution=${s(d.executionId)}` : '',
      d.problem ? `problem=${s(d.problem)}` : '',
      d.consumer ? `consumer=${s(d.consumer)}` : '',
    ].filter(Boolean);
    return `${at} response ${s(d.statusCode)} ${s(d.method)} ${s(d.path)} ${s(d.latencyMs)}ms id=${s(d.requestId)}${extra.length ? ` ${extra.join(' ')}` : ''}`;
  }
  return `${at} ${frame.event} ${frame.data}`;
}

export async function eventsCommand(argv: string[]): Promise<ExitCode> {
  const parsed = parseServerCommand(argv, EVENTS_HELP, {
    namespace: { type: 'string', short: 'n' },
    output: { type: 'string', short: 'o', default: 'text' },
    count: { type: 'string', short: 'c' },
    timeout: { type: 'string' },
  });
  if (!parsed) return EXIT.ok;
  const { values } = parsed;
  const positionals = positionalsUpTo(
    parsed.positionals,
    1,
    'events takes one trigger: <namespace>/<name>',
  );
  const { count, timeout } = limits(values);
  const { namespace, name } = parseTriggerRef(positionals[0], values.namespace);
  const client = new AdminClient(values);
  // The route's path, from its OpenAPI document: the same on a dev server and a gateway.
  const doc = await client.json<{ paths: Record<string, unknown> }>(
    `/api/triggers/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}/openapi.json`,
  );
  const path = Object.keys(doc.paths)[0] ?? '';
  const streamPath = path.replace(/^\/webhook\//, '/webhook-events/').replace(/\{[^}]+\}/g, '_');
  const abort = new AbortController();
  const stop = () => abort.abort();
  process.once('SIGINT', stop);
  const timer = timeout === undefined ? undefined : setTimeout(stop, timeout);
  // Nothing at all (no event, no heartbeat) for --request-timeout: the server or the
  // network is gone without a word; reading on would wait forever.
  // Never less than a heartbeat's period and a margin: a global HOOKGATE_REQUEST_TIMEOUT of
  // 10 s read every quiet, healthy stream as a dead one.
  const silenceMs = client.timeoutMs > 0 ? Math.max(client.timeoutMs, SILENCE_FLOOR_MS) : 0;
  const silence = new AbortController();
  let idleTimer: NodeJS.Timeout | undefined;
  const arrived = () => {
    clearTimeout(idleTimer);
    if (silenceMs > 0) idleTimer = setTimeout(() => silence.abort(), silenceMs);
  };
  let seen = 0;
  try {
    const res = await client.fetch(streamPath, {
      signal: AbortSignal.any([abort.signal, silence.signal]),
      headers: { accept: 'text/event-stream' },
    });
    if (!res.ok || !res.body) throw problemError(res.status, await res.text(), `GET ${streamPath}`);
    console.error(`streaming ${namespace}/${name} (${routePath(path)}); Ctrl-C to stop`);
    arrived();
    for await (const frame of frames(res.body, arrived)) {
      if (frame.event === 'connected' || frame.event === 'heartbeat') continue;
      console.log(
        values.output === 'json'
          ? JSON.stringify({ event: frame.event, data: safeJson(frame.data) })
          : eventLine(frame),
      );
      if (frame.event === 'request' || frame.event === 'response') seen++;
      if (seen >= count) return EXIT.ok;
    }
    // The server ended the stream (a restart, a redeploy, the trigger undeployed): not
    // "ended" as Ctrl-C, --count or --timeout end it, which a script could not tell apart.
    if (!abort.signal.aborted)
      throw new CliError(EXIT.unreachable, 'the server closed the event stream');
  } catch (err) {
    if (!abort.signal.aborted) {
      if (err instanceof CliError) throw err;
      if (silence.signal.aborted) throw silent(silenceMs);
      throw new CliError(EXIT.unreachable, `the event stream broke: ${(err as Error).message}`);
    }
  } finally {
    clearTimeout(timer);
    clearTimeout(idleTimer);
    process.off('SIGINT', stop);
    abort.abort();
  }
  return EXIT.ok;
}

/** The server's heartbeat period (15 s) and 5 s for a slow network: the shortest silence read as gone. */
const SILENCE_FLOOR_MS = 20_000;

function silent(ms: number): CliError {
  return new CliError(
    EXIT.unreachable,
    `the event stream was silent for ${formatDuration(ms)} (no event, no heartbeat: the server sends one every 15 s): the server or the network is gone; --request-timeout to wait longer`,
  );
}

function limits(values: {
  output: string;
  count?: string | undefined;
  timeout?: string | undefined;
}): {
  count: number;
  timeout: number | undefined;
} {
  outputFormat(values.output, ['text', 'json']);
  const count = values.count === undefined ? Infinity : Number(values.count);
  if (count !== Infinity && !(Number.isInteger(count) && count > 0))
    throw usageError('--count must be a positive integer');
  const timeout =
    values.timeout === undefined ? undefined : durationMs(values.timeout, '--timeout');
  if (timeout !== undefined && !(timeout > 0))
    throw usageError('--timeout must be a positive duration (e.g. 10m) or number of seconds');
  return { count, timeout };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
