// The string formats a CRD schema may use (the API server ignores any other format):
// a checker per format, after the OpenAPI format registry the API server validates
// with. Integer formats int32/int64 are range checks, done in validate.ts.
import { isIP } from 'node:net';

const UUID = /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i;
const UUID3 = /^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i;
const UUID4 = /^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$/i;
const UUID5 = /^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$/i;
const HOSTNAME =
  /^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9\-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$/u;
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})?$/;
const MAC =
  /^([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}$|^([0-9a-fA-F]{2}[:-]){7}[0-9a-fA-F]{2}$|^([0-9a-fA-F]{2}[:-]){19}[0-9a-fA-F]{2}$|^([0-9a-fA-F]{4}\.){2}[0-9a-fA-F]{4}$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const GO_DURATION = /^[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$|^[-+]?0$/;
const LOOSE_DURATION = /(\d+)\s*([A-Za-zµ]+)/g;
const DURATION_UNITS = ['ns', 'nano', 'us', 'µs', 'micro', 'ms', 'milli', 's', 'sec', 'm', 'min'];
const DURATION_PREFIXES = ['h', 'hr', 'hour', 'd', 'day', 'w', 'wk', 'week'];
const SHORT_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LONG_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function hostname(s: string): boolean {
  return HOSTNAME.test(s) && s.length <= 255 && s.split('.').every((p) => p.length <= 63);
}

function date(s: string): boolean {
  const m = DATE.exec(s);
  if (!m) return false;
  const d = new Date(`${s}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.getUTCDate() === Number(m[3]);
}

function dateTime(s: string): boolean {
  return (
    DATE_TIME.test(s) && date(s.slice(0, 10)) && !Number.isNaN(Date.parse(s.replace(' ', 'T')))
  );
}

/** Go's time.ParseDuration, or the looser "3 days" form the format registry also accepts. */
function duration(s: string): boolean {
  if (GO_DURATION.test(s)) return true;
  let ok = false;
  for (const m of s.matchAll(LOOSE_DURATION)) {
    const unit = (m[2] ?? '').toLowerCase();
    if (DURATION_UNITS.includes(unit) || DURATION_PREFIXES.some((p) => unit.startsWith(p))) {
      ok = true;
    }
  }
  return ok;
}

/** Go's url.ParseRequestURI: an absolute URI or an absolute path. */
function uri(s: string): boolean {
  if (s.startsWith('/')) return !/\s/.test(s);
  try {
    return new URL(s).protocol.length > 1 && !/\s/.test(s);
  } catch {
    return false;
  }
}

function email(s: string): boolean {
  const addr = /<([^<>]+)>\s*$/.exec(s)?.[1] ?? s;
  return /^[^\s@<>()[\],;:"]+@[^\s@<>()[\],;:"]+$/.test(addr.trim());
}

function cidr(s: string): boolean {
  const [ip, bits, ...rest] = s.split('/');
  if (rest.length > 0 || ip === undefined || bits === undefined || !/^\d+$/.test(bits)) {
    return false;
  }
  const family = isIP(ip);
  return family !== 0 && Number(bits) <= (family === 4 ? 32 : 128);
}

const CHECKS: Record<string, (s: string) => boolean> = {
  bsonobjectid: (s) => /^[0-9a-fA-F]{24}$/.test(s),
  uri,
  email,
  hostname,
  ipv4: (s) => isIP(s) === 4,
  ipv6: (s) => isIP(s) === 6,
  cidr,
  mac: (s) => MAC.test(s),
  uuid: (s) => UUID.test(s),
  uuid3: (s) => UUID3.test(s),
  uuid4: (s) => UUID4.test(s),
  uuid5: (s) => UUID5.test(s),
  hexcolor: (s) => /^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$/.test(s),
  ssn: (s) => /^\d{3}[- ]?\d{2}[- ]?\d{4}$/.test(s),
  byte: (s) => BASE64.test(s),
  password: () => true,
  date,
  datetime: dateTime,
  duration,
  'k8s-short-name': (s) => s.length <= 63 && SHORT_NAME.test(s),
  'k8s-long-name': (s) => s.length <= 253 && LONG_NAME.test(s),
};

/**
 * The checker for a string format, or undefined when the API server does not validate
 * it (names are compared without dashes, so `date-time` is `datetime`).
 */
export function formatChecker(format: string | undefined): ((s: string) => boolean) | undefined {
  if (!format) return undefined;
  if (format.startsWith('k8s-')) return CHECKS[format];
  return CHECKS[format.replace(/-/g, '')];
}

const POSIX_CLASSES: Record<string, string> = {
  alnum: 'A-Za-z0-9',
  alpha: 'A-Za-z',
  ascii: '\\x00-\\x7F',
  blank: '\\t ',
  digit: '0-9',
  lower: 'a-z',
  space: '\\t\\n\\v\\f\\r ',
  upper: 'A-Z',
  word: 'A-Za-z0-9_',
  xdigit: '0-9A-Fa-f',
};
const patterns = new Map<string, RegExp | Error>();

/**
 * A schema `pattern` (RE2 syntax, as Go evaluates it) as a JavaScript RegExp: leading
 * `(?i)`/`(?s)` flags, POSIX classes, `\A` and `\z` are translated; an unparsable
 * pattern yields the Error to report.
 */
export function compilePattern(pattern: string): RegExp | Error {
  const cached = patterns.get(pattern);
  if (cached) return cached;
  let source = pattern;
  let flags = 'u';
  const lead = /^\(\?([is]+)\)/.exec(source);
  if (lead) {
    flags += lead[1] ?? '';
    source = source.slice(lead[0].length);
  }
  source = source
    .replace(/\[:(\^?)([a-z]+):\]/g, (m, neg: string, name: string) =>
      neg ? m : (POSIX_CLASSES[name] ?? m),
    )
    .replace(/\\A/g, '^')
    .replace(/\\z/g, '$');
  let out: RegExp | Error;
  try {
    out = new RegExp(source, flags);
  } catch (err) {
    out = err instanceof Error ? err : new Error(String(err));
  }
  patterns.set(pattern, out);
  return out;
}
