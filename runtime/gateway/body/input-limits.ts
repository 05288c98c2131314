// Input limits of a request body, checked before the body is parsed.
//
// JSON.parse accepts any nesting depth, any number of keys, any string length and
// numbers such as 1e309 (Infinity). A deeply nested body then breaks whatever walks it
// recursively later (structuredClone, the execution store, JSONata), long after the
// webhook was accepted. So every JSON body is scanned once over its raw UTF-8 bytes
// before JSON.parse: nesting is counted outside strings, keys are counted as the `:`
// outside strings, strings are measured between their quotes, and a number token is
// converted only when it could overflow (an exponent, or 300 characters or more).
// The scan does not validate JSON; JSON.parse still does that.
//
// `"` and `\` never occur inside a multi-byte UTF-8 sequence, so scanning bytes is
// exact for UTF-8; a body in another charset is scanned after re-encoding it.
import { HttpProblem } from '../../errors.ts';

export interface InputLimits {
  /** Nested objects and arrays, outermost included. */
  maxDepth: number;
  /** Object members in the whole document (form fields for a form body). */
  maxKeys: number;
  /** Bytes of one JSON string (key or value) between its quotes, escapes as written. */
  maxStringBytes: number;
}

/** Gateway-wide defaults; a trigger's `spec.inputLimits` overrides them field by field. */
export const DEFAULT_INPUT_LIMITS: Readonly<InputLimits> = Object.freeze({
  maxDepth: 64,
  maxKeys: 50_000,
  maxStringBytes: 1024 * 1024,
});

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const COLON = 0x3a;
const MINUS = 0x2d;
const DIGIT_0 = 0x30;
const DIGIT_9 = 0x39;
const LOWER_E = 0x65;
const UPPER_E = 0x45;
const DOT = 0x2e;
const PLUS = 0x2b;

/** A number this long without an exponent may already overflow (1e308 has 309 digits). */
const LONG_NUMBER = 300;

function tooDeep(limit: number): HttpProblem {
  return new HttpProblem(
    'HG_ERR_BODY_TOO_DEEP',
    `The JSON body is nested more than ${limit} levels deep.`,
  );
}

export function tooManyKeys(limit: number): HttpProblem {
  return new HttpProblem(
    'HG_ERR_BODY_TOO_MANY_KEYS',
    `The request body has more than ${limit} keys.`,
  );
}

function stringTooLong(limit: number): HttpProblem {
  return new HttpProblem(
    'HG_ERR_BODY_STRING_TOO_LONG',
    `A string in the JSON body is longer than ${limit} bytes.`,
  );
}

function outOfRange(): HttpProblem {
  return new HttpProblem(
    'HG_ERR_BODY_NUMBER_OUT_OF_RANGE',
    'A number in the JSON body is too large to be represented (it is not finite).',
  );
}

/**
 * The index of the quote that closes the string opened at `open`, or -1. A plain loop:
 * a native indexOf costs more per call than the short strings of JSON take to walk.
 */
function closingQuote(bytes: Uint8Array, open: number): number {
  const length = bytes.length;
  for (let i = open + 1; i < length; i++) {
    const c = bytes[i] as number;
    if (c === QUOTE) return i;
    if (c === BACKSLASH) i++;
  }
  return -1;
}

function isNumberByte(c: number): boolean {
  return (
    (c >= DIGIT_0 && c <= DIGIT_9) ||
    c === DOT ||
    c === LOWER_E ||
    c === UPPER_E ||
    c === MINUS ||
    c === PLUS
  );
}

/** Refuses a number token that would parse to ±Infinity; returns the index after it. */
function checkNumber(bytes: Uint8Array, start: number): number {
  let end = start + 1;
  let exponent = false;
  while (end < bytes.length && isNumberByte(bytes[end] as number)) {
    const c = bytes[end] as number;
    if (c === LOWER_E || c === UPPER_E) exponent = true;
    end++;
  }
  if (exponent || end - start >= LONG_NUMBER) {
    const token = Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start);
    const value = Number(token.toString('latin1'));
    // NaN is a malformed token: JSON.parse answers that one.
    if (value === Infinity || value === -Infinity) throw outOfRange();
  }
  return end;
}

/** What a byte outside strings means to the scan; 0: nothing. */
const ROLE = new Uint8Array(256);
const STRING = 1;
const OPEN = 2;
const CLOSE = 3;
const KEY = 4;
const NUMBER = 5;
ROLE[QUOTE] = STRING;
ROLE[OPEN_BRACE] = OPEN;
ROLE[OPEN_BRACKET] = OPEN;
ROLE[CLOSE_BRACE] = CLOSE;
ROLE[CLOSE_BRACKET] = CLOSE;
ROLE[COLON] = KEY;
ROLE[MINUS] = NUMBER;
for (let d = DIGIT_0; d <= DIGIT_9; d++) ROLE[d] = NUMBER;

/**
 * Scans JSON text as UTF-8 bytes and throws a 400 problem when it exceeds `limits`.
 * One pass, no allocation except for rare long or exponent numbers.
 */
export function checkJsonLimits(bytes: Uint8Array, limits: InputLimits): void {
  const { maxDepth, maxKeys, maxStringBytes } = limits;
  const length = bytes.length;
  let depth = 0;
  let keys = 0;
  let i = 0;
  while (i < length) {
    switch (ROLE[bytes[i] as number]) {
      case STRING: {
        const close = closingQuote(bytes, i);
        // An unterminated string: JSON.parse refuses the body as malformed.
        if (close < 0) return;
        if (close - i - 1 > maxStringBytes) throw stringTooLong(maxStringBytes);
        i = close + 1;
        break;
      }
      case OPEN:
        if (++depth > maxDepth) throw tooDeep(maxDepth);
        i++;
        break;
      case CLOSE:
        depth--;
        i++;
        break;
      case KEY:
        if (++keys > maxKeys) throw tooManyKeys(maxKeys);
        i++;
        break;
      case NUMBER:
        i = checkNumber(bytes, i);
        break;
      default:
        i++;
    }
  }
}

/** The effective limits of a route: its own where set, the defaults elsewhere. */
export function inputLimits(own: Partial<InputLimits> | undefined): InputLimits {
  if (own === undefined) return DEFAULT_INPUT_LIMITS;
  return {
    maxDepth: own.maxDepth ?? DEFAULT_INPUT_LIMITS.maxDepth,
    maxKeys: own.maxKeys ?? DEFAULT_INPUT_LIMITS.maxKeys,
    maxStringBytes: own.maxStringBytes ?? DEFAULT_INPUT_LIMITS.maxStringBytes,
  };
}
