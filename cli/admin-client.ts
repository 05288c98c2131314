// The admin API of a hookgate server (dev or gateway role) as the CLI calls it:
// --server URL (or HOOKGATE_SERVER), a bearer token from --token, --token-file or
// HOOKGATE_TOKEN. A problem answer becomes a CliError with the problem's title and
// detail; a server that cannot be reached exits 3.
import { readFileSync } from 'node:fs';
import { CliError, EXIT, usageError } from './errors.ts';

export interface ServerOptions {
  server?: string | undefined;
  token?: string | undefined;
  'token-file'?: string | undefined;
}

/** The options every command that talks to a server takes. */
export const SERVER_OPTIONS = {
  server: { type: 'string' },
  token: { type: 'string' },
  'token-file': { type: 'string' },
} as const;

export const SERVER_HELP = `  --server <url>       the admin listener of a hookgate server (env HOOKGATE_SERVER),
                       e.g. http://127.0.0.1:8081
  --token <token>      admin bearer token (env HOOKGATE_TOKEN)
  --token-file <path>  file holding the token`;

export class AdminClient {
  readonly base: string;
  readonly #token: string | undefined;

  constructor(options: ServerOptions, env: NodeJS.ProcessEnv = process.env) {
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
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return { ...(this.#token ? { authorization: `Bearer ${this.#token}` } : {}), ...extra };
  }

  /** A raw response (any status); unreachable → exit 3. */
  async fetch(path: string, init: RequestInit = {}): Promise<Response> {
    const url = `${this.base}${path}`;
    try {
      return await fetch(url, {
        ...init,
        headers: this.headers((init.headers ?? {}) as Record<string, string>),
      });
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new CliError(
        EXIT.unreachable,
        `cannot reach ${this.base}: ${cause?.code ?? cause?.message ?? (err as Error).message}`,
      );
    }
  }

  /** JSON of a 2xx answer; a problem answer throws with its title and detail. */
  async json<T>(path: string, init: RequestInit = {}): Promise<T> {
    const res = await this.fetch(path, init);
    const text = await res.text();
    if (!res.ok) throw problemError(res.status, text, `${init.method ?? 'GET'} ${path}`);
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new CliError(EXIT.unreachable, `${this.base}${path} did not answer JSON`);
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
