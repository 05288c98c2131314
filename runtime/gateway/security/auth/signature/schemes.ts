// The signature schemes: each preset's documented construction, and the generic one
// built from the trigger's fields, as one shape the verifier walks.
//
//   preset            header (value)                          signed bytes              key
//   github            X-Hub-Signature-256 (sha256=<hex>)      body                      secret
//   stripe            Stripe-Signature (t=<ts>,v1=<hex>,…)    <ts>.body                 secret
//   slack             X-Slack-Signature (v0=<hex>)            v0:<ts>:body              secret
//   shopify           X-Shopify-Hmac-Sha256 (<base64>)        body                      secret
//   standardWebhooks  webhook-signature (v1,<b64> v1,<b64>)   <id>.<ts>.body            base64 after whsec_
//   generic           <header> (<prefix><hex|base64>)         the signedPayload template secret
//
// All are HMAC-SHA256 but generic (sha1/sha256/sha512). Timestamps are Unix seconds:
// stripe's comes from its own header, slack's from X-Slack-Request-Timestamp, Standard
// Webhooks' from webhook-timestamp. Delivery ids: webhook-id (signed), X-GitHub-Delivery
// and X-Shopify-Webhook-Id (not signed: they only spot redeliveries), generic idHeader.
import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import type {
  GenericSignature,
  HmacAlgorithm,
  SignatureAuth,
  SignatureEncoding,
} from '../../../../../api/v1alpha1/index.ts';
import { malformed } from './problems.ts';

/** One piece of the signed bytes, in order. */
export type PayloadPart = { literal: Buffer } | 'timestamp' | 'id' | 'body';

/** What one signature header holds once parsed. */
export interface ParsedHeader {
  /** The candidate signatures, still encoded, prefix removed. */
  signatures: string[];
  /** A timestamp carried inside the signature header (Stripe). */
  timestamp?: string;
}

export interface Scheme {
  /** The header that carries the signature(s). */
  header: string;
  algorithm: HmacAlgorithm;
  encoding: SignatureEncoding;
  /** Splits the header value into candidate signatures; throws a malformed problem. */
  parse(value: string): ParsedHeader;
  /** The header value for one encoded signature (what the sender writes; test requests). */
  render(signature: string, timestamp: string): string;
  /** The header with the signed Unix time, when it is not inside the signature header. */
  timestampHeader?: string;
  /** Whether the scheme signs a timestamp at all (tolerance and replay window). */
  timestamped: boolean;
  /** The header with the delivery id. */
  idHeader?: string;
  /** Whether the id is part of the signed bytes (then it is required). */
  idSigned: boolean;
  payload: PayloadPart[];
  /** The HMAC key of one Secret value. Throws when the value cannot be one. */
  key(secret: string): Buffer;
}

/** At most this many signatures in one header are tried (Stripe, Standard Webhooks). */
export const MAX_CANDIDATES = 16;

const literal = (text: string): PayloadPart => ({ literal: Buffer.from(text, 'utf8') });
const utf8Key = (secret: string) => Buffer.from(secret, 'utf8');

/** `<prefix><signature>`: one signature after a fixed prefix. */
function prefixed(header: string, prefix: string): (value: string) => ParsedHeader {
  return (value) => {
    const trimmed = value.trim();
    if (!trimmed.startsWith(prefix)) {
      throw malformed(header, `The ${header} header does not start with "${prefix}".`);
    }
    return { signatures: [trimmed.slice(prefix.length)] };
  };
}

/** Stripe-Signature: `t=<unix>,v1=<hex>[,v1=<hex>…][,v0=…]`; only v1 is HMAC-SHA256. */
function parseStripe(value: string): ParsedHeader {
  const header = 'Stripe-Signature';
  let timestamp: string | undefined;
  const signatures: string[] = [];
  for (const item of value.split(',')) {
    const eq = item.indexOf('=');
    if (eq < 0) continue;
    const name = item.slice(0, eq).trim();
    const text = item.slice(eq + 1).trim();
    if (name === 't') {
      if (timestamp !== undefined) throw malformed(header, `The ${header} header has two "t=".`);
      timestamp = text;
    } else if (name === 'v1') {
      signatures.push(text);
    }
  }
  if (timestamp === undefined) throw malformed(header, `The ${header} header has no "t=".`);
  if (signatures.length === 0) throw malformed(header, `The ${header} header has no "v1=".`);
  return { signatures, timestamp };
}

/** webhook-signature: space-separated `v1,<base64>`; other versions (v1a, …) are skipped. */
function parseStandardWebhooks(value: string): ParsedHeader {
  const signatures: string[] = [];
  for (const item of value.split(' ')) {
    const comma = item.indexOf(',');
    if (comma < 0) continue;
    if (item.slice(0, comma) === 'v1') signatures.push(item.slice(comma + 1));
  }
  if (signatures.length === 0) {
    throw malformed(
      'webhook-signature',
      'The webhook-signature header has no "v1,<base64>" signature.',
    );
  }
  return { signatures };
}

/** A Standard Webhooks secret: base64, usually shown with a `whsec_` prefix. */
export function standardWebhooksKey(secret: string): Buffer {
  const text = secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret;
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(text) || text.length % 4 !== 0) {
    throw new Error('not a base64 secret (whsec_<base64>)');
  }
  const key = Buffer.from(text, 'base64');
  if (key.length === 0) throw new Error('an empty secret');
  return key;
}

/** The signed bytes of a generic scheme: its template split around the placeholders. */
export function templateParts(template: string): PayloadPart[] {
  const parts: PayloadPart[] = [];
  const placeholder = /\{(id|timestamp|body)\}/g;
  let at = 0;
  for (const match of template.matchAll(placeholder)) {
    if (match.index > at) parts.push(literal(template.slice(at, match.index)));
    parts.push(match[1] as 'id' | 'timestamp' | 'body');
    at = match.index + match[0].length;
  }
  if (at < template.length) parts.push(literal(template.slice(at)));
  return parts;
}

function genericScheme(g: GenericSignature): Scheme {
  const payload = templateParts(g.signedPayload ?? '{body}');
  const scheme: Scheme = {
    header: g.header,
    algorithm: g.algorithm ?? 'sha256',
    encoding: g.encoding ?? 'hex',
    parse: prefixed(g.header, g.prefix ?? ''),
    render: (signature) => `${g.prefix ?? ''}${signature}`,
    timestamped: payload.includes('timestamp'),
    idSigned: payload.includes('id'),
    payload,
    key: utf8Key,
  };
  if (g.timestampHeader !== undefined) scheme.timestampHeader = g.timestampHeader;
  if (g.idHeader !== undefined) scheme.idHeader = g.idHeader;
  return scheme;
}

/**
 * Whether a delivery's id, when it carries one, is its replay key (verify.ts
 * replayToken: a signed id, or an unsigned one without a signed timestamp), hence its
 * implicit idempotency key (claims.ts). Stripe and Slack send no id; a generic scheme
 * with a timestamp and an unsigned id is keyed by its signed bytes.
 */
export function keyedById(scheme: Scheme): boolean {
  return scheme.idHeader !== undefined && (scheme.idSigned || !scheme.timestamped);
}

/** The scheme of a trigger's signature settings. */
export function schemeOf(signature: SignatureAuth): Scheme {
  switch (signature.preset) {
    case 'github':
      return {
        header: 'X-Hub-Signature-256',
        algorithm: 'sha256',
        encoding: 'hex',
        parse: prefixed('X-Hub-Signature-256', 'sha256='),
        render: (signature) => `sha256=${signature}`,
        timestamped: false,
        idHeader: 'X-GitHub-Delivery',
        idSigned: false,
        payload: ['body'],
        key: utf8Key,
      };
    case 'stripe':
      return {
        header: 'Stripe-Signature',
        algorithm: 'sha256',
        encoding: 'hex',
        parse: parseStripe,
        render: (signature, timestamp) => `t=${timestamp},v1=${signature}`,
        timestamped: true,
        idSigned: false,
        payload: ['timestamp', literal('.'), 'body'],
        key: utf8Key,
      };
    case 'slack':
      return {
        header: 'X-Slack-Signature',
        algorithm: 'sha256',
        encoding: 'hex',
        parse: prefixed('X-Slack-Signature', 'v0='),
        render: (signature) => `v0=${signature}`,
        timestampHeader: 'X-Slack-Request-Timestamp',
        timestamped: true,
        idSigned: false,
        payload: [literal('v0:'), 'timestamp', literal(':'), 'body'],
        key: utf8Key,
      };
    case 'shopify':
      return {
        header: 'X-Shopify-Hmac-Sha256',
        algorithm: 'sha256',
        encoding: 'base64',
        parse: prefixed('X-Shopify-Hmac-Sha256', ''),
        render: (signature) => signature,
        timestamped: false,
        idHeader: 'X-Shopify-Webhook-Id',
        idSigned: false,
        payload: ['body'],
        key: utf8Key,
      };
    case 'standardWebhooks':
      return {
        header: 'webhook-signature',
        algorithm: 'sha256',
        encoding: 'base64',
        parse: parseStandardWebhooks,
        render: (signature) => `v1,${signature}`,
        timestampHeader: 'webhook-timestamp',
        timestamped: true,
        idHeader: 'webhook-id',
        idSigned: true,
        payload: ['id', literal('.'), 'timestamp', literal('.'), 'body'],
        key: standardWebhooksKey,
      };
    case 'generic':
      if (!signature.generic) throw new Error('signature.generic is missing');
      return genericScheme(signature.generic);
  }
}

/** Bytes of an HMAC digest. */
export const DIGEST_BYTES: Record<HmacAlgorithm, number> = { sha1: 20, sha256: 32, sha512: 64 };

const HEX = /^[0-9a-fA-F]+$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/**
 * A candidate signature as bytes, or undefined when it is not a well-formed signature of
 * the scheme's digest (wrong alphabet, truncated, too long, another algorithm's length).
 */
export function decodeSignature(
  text: string,
  encoding: SignatureEncoding,
  bytes: number,
): Buffer | undefined {
  if (encoding === 'hex') {
    if (text.length !== bytes * 2 || !HEX.test(text)) return undefined;
    return Buffer.from(text, 'hex');
  }
  if (text.length !== Math.ceil(bytes / 3) * 4 || !BASE64.test(text)) return undefined;
  const decoded = Buffer.from(text, 'base64');
  return decoded.length === bytes ? decoded : undefined;
}

/** The header a trigger's deliveries carry their signature in. */
export function signatureHeader(signature: SignatureAuth): string {
  return schemeOf(signature).header;
}

/** The HMAC of a delivery's signed bytes: the scheme's parts in order. */
export function signedDigest(
  scheme: Scheme,
  key: Buffer,
  delivery: { timestamp?: string | undefined; id?: string | undefined },
  body: Buffer,
): Buffer {
  return feedSigned(createHmac(scheme.algorithm, key), scheme, delivery, body).digest();
}

/**
 * The SHA-256 of a delivery's signed bytes (what its HMAC covers), whichever secret
 * signed it: the replay key of a scheme that signs a timestamp but no id (verify.ts).
 * Not a signature, which a header may carry several of (one per secret while the
 * sender rotates), each a valid key of the same delivery.
 */
export function signedContentDigest(
  scheme: Scheme,
  delivery: { timestamp?: string | undefined; id?: string | undefined },
  body: Buffer,
): Buffer {
  return feedSigned(createHash('sha256'), scheme, delivery, body).digest();
}

function feedSigned<T extends Hash | Hmac>(
  hash: T,
  scheme: Scheme,
  delivery: { timestamp?: string | undefined; id?: string | undefined },
  body: Buffer,
): T {
  for (const part of scheme.payload) {
    if (part === 'body') hash.update(body);
    else if (part === 'timestamp') hash.update(delivery.timestamp ?? '', 'utf8');
    else if (part === 'id') hash.update(delivery.id ?? '', 'utf8');
    else hash.update(part.literal);
  }
  return hash;
}
