// The admin API of a hookgate server (dev or gateway role) as the CLI calls it:
// --server URL (or HOOKGATE_SERVER), a bearer token from --token, --token-file or
// HOOKGATE_TOKEN. A problem answer becomes a CliError with the problem's title and
// detail; a server that cannot be reached, or that does not answer within
// --request-timeout (HOOKGATE_REQUEST_TIMEOUT, default 30 s), exits 3.
import { readFileSync } from 'node:fs';
import { durationMs, formatDuration } from './durations.ts';
import { CliError, EXIT, usageError } from './errors.ts';

export interface ServerOptions {
  server?: string | undefined;
  token?: string | undefined;
  'token-file'?: string | undefined;
  'request-timeout'?: string | undefined;
}

/**
 * How long a call waits for the server's answer by default: a server that accepted the
 * connection and never answers must not hold a script forever.
 */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

/** The options every command that talks to a server takes. */
export const SERVER_OPTIONS = {
  server: { type: 'string' },
  token: { type: 'string' },
  'token-file': { type: 'string' },
  'request-timeout': { type: 'string' },
} as const;

/** The help lines of SERVER_OPTIONS; `timeout` those of --request-timeout, as a command bounds it. */
export function serverHelp(
  timeout = `give up (exit 3) when the server has not answered within this,
                       e.g. 30s or 2m (default 30s; 0 waits forever)`,
): string {
  return `  --server <url>       the admin listener of a hookgate server (env HOOKGATE_SERVER),
                       e.g. http://127.0.0.1:8081
  --token <token>      admin bearer token (env HOOKGATE_TOKEN)
  --token-file <path>  file holding the token
  --request-timeout <duration>  (env HOOKGATE_REQUEST_TIMEOUT)
                       ${timeout}`;
}

export const SERVER_HELP = serverHelp();

/** Where a client's timeout came from, for its messages. */
const TIMEOUT_FLAG = '--request-timeout';

export class AdminClient {
  readonly base: string;
  /** The longest wait for an answer, ms (0: none): --request-timeout, its env, or the default. */
  readonly timeoutMs: number;
  readonly #token: string | undefined;

  constructor(
    options: ServerOptions,
    env: NodeJS.ProcessEnv = process.env,
    defaultTimeoutMs = DEFAULT_REQUEST_TIMEOUT_MS,
  ) {
    const server = options.server ?? env.HOOKGATE_SERVER;
    if (!server) throw usageError('name the server: --server <url> or HOOKGATE_SERVER');
    const url = URL.parse(server);
    if (url?.protocol !== 'http:' && url?.protocol !== 'https:')
      throw usageError(`--server: "${server}" is not an http or https URL`);
    this.base = url.href.replace(/\/+$/, '');
    let token = options.token ?? env.HOOKGATE_TOKEN;
    if (options['token-file']) {
      try {
        token = readFileSync(options['token-file'], 'utf8').trim();
      } catch (err) {
        throw usageError(`--token-file: ${(err as Error).message}`);
      }
    }
    // fetch() would refuse it as a header value, which read as "cannot reach" (exit 3).
    // The token is a secret: the message does not repeat it.
    if (token !== undefined && !/^[\x21-\x7e]*$/.test(token))
      throw usageError('the admin token holds a space or a character a header cannot carry');
    this.#token = token;
    const flag = options['request-timeout'];
    const fromEnv = env.HOOKGATE_REQUEST_TIMEOUT;
    if (flag !== undefined) this.timeoutMs = durationMs(flag, TIMEOUT_FLAG);
    else if (fromEnv) this.timeoutMs = durationMs(fromEnv, 'HOOKGATE_REQUEST_TIMEOUT');
    else this.timeoutMs = defaultTimeoutMs;
  }

  /** The error of a call that got no answer in time (exit 3, as a server not there). */
  timedOut(what: string): CliError {
    return new CliError(
      EXIT.unreachable,
      `no answer from ${this.base} within ${formatDuration(this.timeoutMs)} (${what}; ${TIMEOUT_FLAG} or HOOKGATE_REQUEST_TIMEOUT to wait longer)`,
    );
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return { ...(this.#token ? { authorization: `Bearer ${this.#token}` } : {}), ...extra };
  }

  /**
   * A raw response (any status) once its headers came, within the timeout; its body is
   * the caller's to read, for as long as it takes (a stream: events keeps its own
   * watch). Unreachable, or no answer in time → exit 3; `init.signal` aborting it
   * rejects with that signal's reason.
   */
  async fetch(path: string, init: RequestInit = {}): Promise<Response> {
    const deadline = this.#deadline();
    try {
      return await this.#send(path, init, deadline.signal);
    } finally {
      deadline.clear();
    }
  }

  /**
   * JSON of a 2xx answer, the whole of it within the timeout; a problem answer throws
   * with its title and detail.
   */
  async json<T>(path: string, init: RequestInit = {}): Promise<T> {
    return (await this.answer<T>(path, init)).body;
  }

  /** json() with the answer's headers. */
  async answer<T>(path: string, init: RequestInit = {}): Promise<{ body: T; headers: Headers }> {
    const what = `${init.method ?? 'GET'} ${path}`;
    const deadline = this.#deadline();
    let res: Response;
    let text: string;
    try {
      res = await this.#send(path, init, deadline.signal);
      text = await res.text();
    } catch (err) {
      if (deadline.signal?.aborted) throw this.timedOut(what);
      if (err instanceof CliError) throw err;
      throw new CliError(
        EXIT.unreachable,
        `${this.base} broke off its answer to ${what}: ${(err as Error).message}`,
      );
    } finally {
      deadline.clear();
    }
    if (!res.ok) throw problemError(res.status, text, what);
    try {
      return { body: JSON.parse(text) as T, headers: res.headers };
    } catch {
      throw new CliError(EXIT.unreachable, `${this.base}${path} did not answer JSON`);
    }
  }

  /** A signal that aborts once the timeout has passed (none without one), and its clearing. */
  #deadline(): { signal: AbortSignal | undefined; clear: () => void } {
    if (this.timeoutMs <= 0) return { signal: undefined, clear: () => undefined };
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.timeoutMs);
    return { signal: controller.signal, clear: () => clearTimeout(timer) };
  }

  async #send(path: string, init: RequestInit, deadline: AbortSignal | undefined) {
    const signals = [init.signal, deadline].filter((s): s is AbortSignal => s != null);
    try {
      return await fetch(`${this.base}${path}`, {
        ...init,
        headers: this.headers((init.headers ?? {}) as Record<string, string>),
        ...(signals.length > 0 ? { signal: AbortSignal.any(signals) } : {}),
      });
    } catch (err) {
      if (deadline?.aborted) throw this.timedOut(`${init.method ?? 'GET'} ${path}`);
      if (init.signal?.aborted) throw err;
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new CliError(
        EXIT.unreachable,
        `cannot reach ${this.base}: ${cause?.code ?? cause?.message ?? (err as Error).message}`,
      );
    }
  }
}

/** A non-2xx answer of the admin API as an error: exit 1 with what the server said. */
export function problemError(status: number, text: string, what: string): CliError {
  let message = `${what}: HTTP ${status}`;
  try {
    const p = JSON.parse(text) as { title?: string; detail?: string; code?: string };
    if (p.title)
      message = `${what}: ${p.title}${p.detail ? `: ${p.detail}` : ''} (${status}${p.code ? ` ${p.code}` : ''})`;
  } catch {
    // Not a problem document: the status says it.
  }
  return new CliError(EXIT.failed, message);
}

/** `<namespace>/<name>`, or `<name>` in `namespace` (default: default). */
export function parseTriggerRef(
  ref: string | undefined,
  namespace: string | undefined,
  what = 'trigger',
): { namespace: string; name: string } {
  if (!ref) throw usageError(`name the ${what}: <namespace>/<name> or <name> with -n`);
  const slash = ref.indexOf('/');
  if (slash < 0) return { namespace: namespace ?? 'default', name: ref };
  const ns = ref.slice(0, slash);
  const name = ref.slice(slash + 1);
  if (!ns || !name || name.includes('/')) throw usageError(`"${ref}" is not <namespace>/<name>`);
  return { namespace: ns, name };
}
