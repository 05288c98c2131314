// Request bodies: reading them within a size limit and parsing them by Content-Type.
//
// The gateway registers one catch-all Fastify content-type parser that calls
// readBody() on the raw request stream (the limit is the route's spec.maxBodyBytes,
// which a single wildcard Fastify route cannot express through Fastify's bodyLimit)
// and then parseBody() on the Buffer.
//
// Parsed shapes (what downstream nodes see as the trigger's body):
//   empty body                                → null
//   application/json, application/*+json     → the JSON value
//   application/x-www-form-urlencoded         → { key: "value" | ["v1", "v2"] }
// JSON and form bodies are checked against the input limits (input-limits.ts: depth,
// keys, string length, finite numbers) before they are parsed; XML and text stay
// strings, so they build no nested structure.
//   application/xml, text/xml, */*+xml        → the XML text (string, not parsed)
//   text/*                                    → string
//   multipart/*                               → 415 (not supported; send JSON or binary)
//   anything else, or no Content-Type         → { contentType, encoding: "base64", data }
import type { IncomingMessage } from 'node:http';
import { sendContinue } from '../client-errors.ts';
import { setOwn } from '../../own-property.ts';
import type { Readable } from 'node:stream';
import { HttpProblem } from '../../errors.ts';
import {
  checkJsonLimits,
  DEFAULT_INPUT_LIMITS,
  tooManyKeys,
  type InputLimits,
} from './input-limits.ts';

/** A non-text, non-JSON body, kept as base64 so that it survives JSON serialisation. */
export interface BinaryBody {
  contentType: string;
  encoding: 'base64';
  data: string;
}

/** Shared between the requests that send the same header: read only. */
interface MediaType {
  /** `type/subtype`, lower-case, without parameters. */
  readonly essence: string;
  readonly charset: string | undefined;
}

/** The last header parsed and what it gave (nearly every request of an endpoint sends the same). */
let lastMediaType: { header: string; media: MediaType | undefined } | undefined;

export function parseMediaType(contentType: string | undefined): MediaType | undefined {
  if (contentType === undefined) return undefined;
  if (lastMediaType?.header === contentType) return lastMediaType.media;
  const media = parseMediaTypeNow(contentType);
  lastMediaType = { header: contentType, media };
  return media;
}

function parseMediaTypeNow(contentType: string): MediaType | undefined {
  const [essencePart = '', ...params] = contentType.split(';');
  const essence = essencePart.trim().toLowerCase();
  if (essence === '') return undefined;
  let charset: string | undefined;
  for (const param of params) {
    const eq = param.indexOf('=');
    if (eq < 0) continue;
    if (param.slice(0, eq).trim().toLowerCase() !== 'charset') continue;
    charset = param
      .slice(eq + 1)
      .trim()
      .replace(/^"(.*)"$/, '$1')
      .toLowerCase();
  }
  return { essence, charset };
}

/** Whether a body of this media type (essence, lower case) is parsed as JSON. */
export function isJson(essence: string): boolean {
  return essence === 'application/json' || /^[a-z0-9!#$&^_.-]+\/[^;]*\+json$/.test(essence);
}

function isXml(essence: string): boolean {
  return (
    essence === 'application/xml' ||
    essence === 'text/xml' ||
    /^[a-z0-9!#$&^_.-]+\/[^;]*\+xml$/.test(essence)
  );
}

/** The decoder of nearly every body, made once: decode() without `stream` keeps no state. */
const UTF8 = new TextDecoder('utf-8', { fatal: false, ignoreBOM: false });

function decodeText(buffer: Buffer, charset: string | undefined): string {
  if (isUtf8(charset)) return UTF8.decode(buffer);
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(charset, { fatal: false, ignoreBOM: false });
  } catch {
    throw new HttpProblem(
      'HG_ERR_UNSUPPORTED_MEDIA_TYPE',
      `The charset "${String(charset).slice(0, 40)}" is not supported.`,
    );
  }
  return decoder.decode(buffer);
}

function isUtf8(charset: string | undefined): boolean {
  return charset === undefined || charset === 'utf-8' || charset === 'utf8';
}

function parseJson(buffer: Buffer, charset: string | undefined, limits: InputLimits): unknown {
  const text = decodeText(buffer, charset);
  // Before JSON.parse: a body over the limits costs one scan, never a parse.
  checkJsonLimits(isUtf8(charset) ? buffer : Buffer.from(text, 'utf8'), limits);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    // The parser's message (with positions and excerpts) stays out of the answer.
    throw new HttpProblem('HG_ERR_BODY_MALFORMED', 'The request body is not valid JSON.');
  }
}

/**
 * application/x-www-form-urlencoded → an object; a repeated key becomes an array of its
 * values in order. Keys are defined as own properties, so `__proto__` is just a key.
 * More than `maxKeys` fields (repeats included) is refused with 400.
 */
export function parseForm(
  text: string,
  maxKeys: number = DEFAULT_INPUT_LIMITS.maxKeys,
): Record<string, string | string[]> {
  const result: Record<string, string | string[]> = {};
  let fields = 0;
  for (const [key, value] of new URLSearchParams(text)) {
    if (++fields > maxKeys) throw tooManyKeys(maxKeys);
    const existing = Object.hasOwn(result, key) ? result[key] : undefined;
    if (Array.isArray(existing)) {
      // In place: copying the array per repeat made a body of one repeated key quadratic.
      existing.push(value);
      continue;
    }
    const next = existing === undefined ? value : [existing, value];
    setOwn(result, key, next);
  }
  return result;
}

/** Parses a raw request body by its Content-Type (see the table at the top of this file). */
export function parseBody(
  buffer: Buffer,
  contentType: string | undefined,
  limits: InputLimits = DEFAULT_INPUT_LIMITS,
): unknown {
  if (buffer.length === 0) return null;
  const media = parseMediaType(contentType);
  if (media === undefined) {
    return {
      contentType: 'application/octet-stream',
      encoding: 'base64',
      data: buffer.toString('base64'),
    } satisfies BinaryBody;
  }
  const { essence, charset } = media;
  if (isJson(essence)) return parseJson(buffer, charset, limits);
  if (essence === 'application/x-www-form-urlencoded')
    return parseForm(decodeText(buffer, charset), limits.maxKeys);
  if (isXml(essence) || essence.startsWith('text/')) return decodeText(buffer, charset);
  if (essence.startsWith('multipart/')) {
    throw new HttpProblem(
      'HG_ERR_UNSUPPORTED_MEDIA_TYPE',
      'multipart bodies are not supported; send JSON, form, text or a single binary body.',
    );
  }
  return {
    contentType: essence,
    encoding: 'base64',
    data: buffer.toString('base64'),
  } satisfies BinaryBody;
}

function tooLarge(limit: number): HttpProblem {
  return new HttpProblem(
    'HG_ERR_BODY_TOO_LARGE',
    `The request body is larger than this endpoint accepts (${limit} bytes).`,
  );
}

/**
 * Throws 413 when a declared Content-Length exceeds the limit, before any byte is read.
 * A malformed Content-Length never reaches here (Node's HTTP parser answers 400).
 */
export function checkContentLength(contentLength: string | undefined, limit: number): void {
  if (contentLength === undefined) return;
  const declared = Number(contentLength);
  if (Number.isFinite(declared) && declared > limit) throw tooLarge(limit);
}

/**
 * Reads a request body stream into one Buffer, refusing bodies over `limit` bytes:
 * by the declared Content-Length before reading, and by counting while reading (chunked
 * bodies declare no length). On overflow it stops collecting without destroying the
 * stream (as Fastify's own body reader does), so the 413 answer can still be written;
 * the rest of the body is discarded as it arrives.
 */
export async function readBody(
  stream: Readable,
  limit: number,
  contentLength?: string,
): Promise<Buffer> {
  checkContentLength(contentLength, limit);
  return new Promise<Buffer>((resolve, reject) => {
    collect(stream, limit, (error, body) => (error ? reject(error) : resolve(body as Buffer)));
  });
}

/**
 * A request body must come as sent: the gateway decodes no content coding (gzip, br,
 * deflate), and a coded body passed on as if it were its Content-Type (JSON failing as
 * malformed, binary handed to the workflow still compressed) helps nobody. RFC 9110
 * (15.5.16) answers a content coding the server does not take with 415, naming the ones
 * it takes in Accept-Encoding (12.5.3). `identity` (or nothing) is the only one.
 */
export function checkContentEncoding(header: string | string[] | undefined): void {
  if (header === undefined) return;
  const codings = (Array.isArray(header) ? header.join(',') : header)
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  if (codings.length === 0) return;
  throw new HttpProblem(
    'HG_ERR_UNSUPPORTED_MEDIA_TYPE',
    `Content-Encoding "${codings.join(', ').slice(0, 40)}" is not supported: send the body without a content coding.`,
    { headers: { 'accept-encoding': 'identity' } },
  );
}

/**
 * readBody for Fastify's content-type parser, which takes a callback: the webhook
 * path reads every body this way, without a promise per request.
 */
export function readBodyThen(
  stream: Readable,
  limit: number,
  contentLength: string | undefined,
  callback: (error: Error | null, body?: Buffer) => void,
): void {
  try {
    checkContentLength(contentLength, limit);
  } catch (error) {
    callback(error as Error);
    return;
  }
  sendContinue(stream as IncomingMessage);
  collect(stream, limit, callback);
}

function collect(
  stream: Readable,
  limit: number,
  callback: (error: Error | null, body?: Buffer) => void,
): void {
  const chunks: Buffer[] = [];
  let received = 0;
  const cleanup = () => {
    stream.removeListener('data', onData);
    stream.removeListener('end', onEnd);
    stream.removeListener('error', onError);
  };
  const onData = (chunk: Buffer | string) => {
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    received += buffer.length;
    if (received > limit) {
      cleanup();
      callback(tooLarge(limit));
      return;
    }
    chunks.push(buffer);
  };
  const onEnd = () => {
    cleanup();
    // A small body usually arrives in one chunk: no copy then.
    callback(null, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, received));
  };
  const onError = (error: Error) => {
    cleanup();
    callback(error);
  };
  stream.on('data', onData);
  stream.on('end', onEnd);
  stream.on('error', onError);
}
