// Field errors worded as apimachinery words them (`Unsupported value: "GETT": supported
// values: "GET", "POST"`): each cause type has a label, most print the bad value (a
// quoted string, a plain number, or JSON), and a detail follows after a colon.
import { canonicalJson, type FieldError, type FieldPath } from './types.ts';

/** Marks a cause printed without its value (CEL rules on objects and lists). */
export const OMIT: unique symbol = Symbol('omit value');
type Bad = unknown;

/** A value already rendered (e.g. a Go struct, whose fields keep their order). */
export class Rendered {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
}

const LABELS: Record<string, string> = {
  FieldValueRequired: 'Required value',
  FieldValueForbidden: 'Forbidden',
  FieldValueTooLong: 'Too long',
  FieldValueInvalid: 'Invalid value',
  FieldValueTypeInvalid: 'Invalid value',
  FieldValueNotSupported: 'Unsupported value',
  FieldValueDuplicate: 'Duplicate value',
  FieldValueTooMany: 'Too many',
  InternalError: 'Internal error',
};

/** Causes that never print a value. */
const VALUELESS = new Set([
  'FieldValueRequired',
  'FieldValueForbidden',
  'FieldValueTooLong',
  'InternalError',
]);

/**
 * A float as Go's `%v` prints it: shortest digits, exponent form (`1e+06`, `1.5e-05`)
 * when the decimal exponent is below -4 or at least 6.
 */
export function goFloat(n: number): string {
  if (!Number.isFinite(n)) return n > 0 ? '+Inf' : n < 0 ? '-Inf' : 'NaN';
  if (n === 0) return '0';
  const [mantissa = '', e = '0'] = n.toExponential().split('e');
  const exp = Number(e);
  if (exp < -4 || exp >= 6) {
    return `${mantissa}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
  }
  return String(n);
}

/** A JSON number as the API server holds it: whole numbers are int64, others float64. */
export function goNumber(n: number): string {
  return Number.isInteger(n) ? String(n) : goFloat(n);
}

/** JSON text with <, >, & escaped, as Go's encoding/json writes it. */
export function goEscape(json: string): string {
  return json.replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026');
}

/** Go's encoding/json for a map: sorted keys, HTML characters escaped. */
export function goJson(value: unknown): string {
  return goEscape(canonicalJson(value ?? null));
}

function renderValue(value: Bad): string {
  if (value instanceof Rendered) return value.text;
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') return goNumber(value);
  if (typeof value === 'boolean') return String(value);
  return goJson(value);
}

/** The cause text without the field: label, then the value, then the detail. */
export function errorBody(reason: string, value: Bad, detail = ''): string {
  let s = LABELS[reason] ?? LABELS.InternalError ?? '';
  if (!VALUELESS.has(reason) && value !== OMIT) s += `: ${renderValue(value)}`;
  return detail ? `${s}: ${detail}` : s;
}

function fieldError(path: FieldPath | string, reason: string, value: Bad, detail = ''): FieldError {
  return { field: String(path), reason, message: errorBody(reason, value, detail) };
}

export const fe = {
  required: (p: FieldPath | string, detail = ''): FieldError =>
    fieldError(p, 'FieldValueRequired', '', detail),
  forbidden: (p: FieldPath | string, detail: string): FieldError =>
    fieldError(p, 'FieldValueForbidden', '', detail),
  invalid: (p: FieldPath | string, value: Bad, detail: string): FieldError =>
    fieldError(p, 'FieldValueInvalid', value, detail),
  typeInvalid: (p: FieldPath | string, value: Bad, detail: string): FieldError =>
    fieldError(p, 'FieldValueTypeInvalid', value, detail),
  duplicate: (p: FieldPath | string, value: Bad): FieldError =>
    fieldError(p, 'FieldValueDuplicate', value),
  notSupported: (p: FieldPath | string, value: Bad, supported: string[]): FieldError =>
    fieldError(
      p,
      'FieldValueNotSupported',
      value,
      supported.length > 0
        ? `supported values: ${supported.map((v) => JSON.stringify(v)).join(', ')}`
        : '',
    ),
  tooLong: (p: FieldPath | string, max: number): FieldError =>
    fieldError(
      p,
      'FieldValueTooLong',
      '',
      `may not be more than ${max} ${max === 1 ? 'byte' : 'bytes'}`,
    ),
  tooMany: (p: FieldPath | string, actual: number, max: number): FieldError =>
    fieldError(
      p,
      'FieldValueTooMany',
      actual,
      `must have at most ${max} ${max === 1 ? 'item' : 'items'}`,
    ),
  internal: (p: FieldPath | string, detail: string): FieldError =>
    fieldError(p, 'InternalError', '', detail),
};

/** `a: b` as `field.Error.Error()` prints one error (used for warnings). */
export function errorLine(e: FieldError): string {
  return `${e.field}: ${e.message}`;
}
