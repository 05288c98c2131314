// One outbound HTTP request through the guard: no redirects followed (a 3xx is the
// response), a time limit per request, a bounded response body.
import { request } from 'undici';
import { OutboundRefusedError, findRefusal, type OutboundTarget } from './guard.ts';

export interface OutboundRequest {
  method: string;
  url: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  /** Time allowed for the whole request (connect, headers and body). */
  timeoutMs: number;
  /** Schemes allowed, e.g. `['https:']` for callbacks. */
  protocols: string[];
  signal?: AbortSignal;
  /** Response bodies longer than this fail the request. Default 5 MiB. */
  maxResponseBytes?: number;
  /**
   * The caller needs the status and headers only (callbacks): the answer resolves once
   * they arrive, with an empty body; what the server sends as a body is read past (up
   * to maxResponseBytes, so that the connection can be used again) or dropped, in the
   * background, never holding the answer or failing it.
   */
  ignoreBody?: boolean;
}

export interface OutboundResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** The request took longer than its time limit. */
export class OutboundTimeoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OutboundTimeoutError';
  }
}

/** Sends one request; throws OutboundRefusedError, OutboundTimeoutError or a network error. */
export async function sendOutbound(
  guard: OutboundTarget,
  req: OutboundRequest,
): Promise<OutboundResponse> {
  const checked = guard.check(req.url, { protocols: req.protocols });
  const timeout = AbortSignal.timeout(req.timeoutMs);
  const signal = req.signal ? AbortSignal.any([req.signal, timeout]) : timeout;
  const max = req.maxResponseBytes ?? 5 * 1024 * 1024;
  try {
    const response = await request(checked.url, {
      method: req.method as 'GET',
      headers: req.headers ?? {},
      body: req.body ?? null,
      dispatcher: guard.dispatcher(checked),
      signal,
      headersTimeout: req.timeoutMs,
      bodyTimeout: req.timeoutMs,
    });
    if (req.ignoreBody) {
      response.body.dump({ limit: max }).catch(() => {});
      return { status: response.statusCode, headers: headersOf(response.headers), body: EMPTY };
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of response.body) {
      const buffer = chunk as Buffer;
      size += buffer.length;
      if (size > max) {
        response.body.destroy();
        throw new Error(`response body larger than ${max} bytes`);
      }
      chunks.push(buffer);
    }
    return {
      status: response.statusCode,
      headers: headersOf(response.headers),
      body: Buffer.concat(chunks),
    };
  } catch (error) {
    const refusal = findRefusal(error);
    if (refusal) throw refusal;
    if (error instanceof OutboundRefusedError) throw error;
    if ((timeout.aborted || isUndiciTimeout(error)) && !req.signal?.aborted) {
      throw new OutboundTimeoutError(`request timed out after ${req.timeoutMs} ms`);
    }
    throw error;
  }
}

const EMPTY = Buffer.alloc(0);

function headersOf(raw: Record<string, string | string[] | undefined>): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(raw)) {
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return headers;
}

const UNDICI_TIMEOUTS = new Set([
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/** undici's own timers may fire before the AbortSignal timeout: same outcome. */
function isUndiciTimeout(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && UNDICI_TIMEOUTS.has(code);
}

/** Whether a status deserves another attempt: 429 and 5xx. */
export function retryableStatus(status: number): boolean {
  return status === 429 || status >= 500;
}
