// Parses and validates the analytics query string into an AnalyticsFilter. Every bad
// parameter is reported at once, as an HG_ERR_INVALID_PARAMETER problem whose `errors`
// extension points at each one (`#/query/<name>`).
import { HttpProblem, type FieldProblem } from '../errors.ts';
import type { AnalyticsFilter } from './backend.ts';
import {
  DEFAULT_WINDOW,
  ENVIRONMENTS,
  HTTP_METHODS,
  MAX_WINDOW_MINUTES,
  OTHER_METHOD,
  WINDOWS,
  type AnalyticsWindow,
  type Environment,
} from './definitions.ts';

const KNOWN = new Set([
  'application',
  'environment',
  'window',
  'method',
  'status',
  'consumer',
  'limit',
]);
const MAX_VALUE_LENGTH = 200;
const MAX_APPLICATIONS = 50;
export const MAX_TOP_LIMIT = 100;

type Query = Record<string, string | string[] | undefined>;

function values(query: Query, name: string): string[] {
  const raw = query[name];
  if (raw === undefined) return [];
  const list = Array.isArray(raw) ? raw : [raw];
  return list
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter((v) => v !== '');
}

function single(query: Query, name: string, errors: FieldProblem[]): string | undefined {
  const list = values(query, name);
  if (list.length > 1) {
    errors.push({ pointer: `#/query/${name}`, detail: `${name} takes one value` });
    return undefined;
  }
  const value = list[0];
  if (value !== undefined && value.length > MAX_VALUE_LENGTH) {
    errors.push({ pointer: `#/query/${name}`, detail: `${name} is too long` });
    return undefined;
  }
  return value;
}

/**
 * The consumer, taken as given: a consumer id is the caller's authenticated name (a JWT
 * `sub` such as `CN=acme,O=Example`), so a comma or a space is part of it, not a list
 * separator to split at or padding to trim. One value; empty is no filter.
 */
function parseConsumer(query: Query, errors: FieldProblem[]): string | undefined {
  const raw = query.consumer;
  if (raw === undefined) return undefined;
  if (Array.isArray(raw) && raw.length !== 1) {
    errors.push({ pointer: '#/query/consumer', detail: 'consumer takes one value' });
    return undefined;
  }
  const value = Array.isArray(raw) ? (raw[0] as string) : raw;
  if (value.length > MAX_VALUE_LENGTH) {
    errors.push({ pointer: '#/query/consumer', detail: 'consumer is too long' });
    return undefined;
  }
  return value === '' ? undefined : value;
}

/** A window like `90m` or `2d` that is not on the list, explained. */
function windowDetail(value: string): string {
  const match = /^(\d+)([mhd])$/.exec(value);
  const allowed = Object.keys(WINDOWS).join(', ');
  if (match) {
    const minutes = Number(match[1]) * { m: 1, h: 60, d: 1440 }[match[2] as 'm' | 'h' | 'd'];
    if (minutes > MAX_WINDOW_MINUTES) {
      return `window ${value} is longer than 24h; allowed: ${allowed}`;
    }
  }
  return `window must be one of ${allowed}`;
}

function parseWindow(query: Query, errors: FieldProblem[]): AnalyticsWindow {
  const window = single(query, 'window', errors) ?? DEFAULT_WINDOW;
  if (Object.hasOwn(WINDOWS, window)) return window as AnalyticsWindow;
  errors.push({ pointer: '#/query/window', detail: windowDetail(window) });
  return DEFAULT_WINDOW;
}

function parseEnvironment(query: Query, errors: FieldProblem[]): Environment | undefined {
  const environment = single(query, 'environment', errors);
  if (environment === undefined) return undefined;
  if ((ENVIRONMENTS as readonly string[]).includes(environment)) {
    return environment as Environment;
  }
  errors.push({
    pointer: '#/query/environment',
    detail: `environment must be one of ${ENVIRONMENTS.join(', ')}`,
  });
  return undefined;
}

function parseMethod(query: Query, errors: FieldProblem[]): string | undefined {
  const method = single(query, 'method', errors)?.toUpperCase();
  if (method === undefined) return undefined;
  if ([...HTTP_METHODS, OTHER_METHOD].includes(method)) return method;
  errors.push({
    pointer: '#/query/method',
    detail: `method must be one of ${HTTP_METHODS.join(', ')}`,
  });
  return undefined;
}

function parseInteger(
  query: Query,
  name: string,
  min: number,
  max: number,
  errors: FieldProblem[],
): number | undefined {
  const raw = single(query, name, errors);
  if (raw === undefined) return undefined;
  if (/^\d{1,4}$/.test(raw) && Number(raw) >= min && Number(raw) <= max) return Number(raw);
  errors.push({
    pointer: `#/query/${name}`,
    detail: `${name} must be an integer from ${min} to ${max}`,
  });
  return undefined;
}

/** The filter, or throws HttpProblem HG_ERR_INVALID_PARAMETER (400). */
export function parseFilter(query: Query): AnalyticsFilter {
  const errors: FieldProblem[] = [];
  for (const name of Object.keys(query)) {
    if (!KNOWN.has(name)) {
      errors.push({ pointer: `#/query/${name}`, detail: `unknown parameter ${name}` });
    }
  }
  const applications = [...new Set(values(query, 'application'))];
  if (applications.length > MAX_APPLICATIONS || applications.some((a) => a.length > 200)) {
    errors.push({ pointer: '#/query/application', detail: 'too many or too long applications' });
  }
  const filter: AnalyticsFilter = {
    applications,
    window: parseWindow(query, errors),
  };
  const environment = parseEnvironment(query, errors);
  const method = parseMethod(query, errors);
  const statusCode = parseInteger(query, 'status', 100, 599, errors);
  const consumer = parseConsumer(query, errors);
  const limit = parseInteger(query, 'limit', 1, MAX_TOP_LIMIT, errors);
  if (errors.length > 0) {
    throw new HttpProblem('HG_ERR_INVALID_PARAMETER', errors.map((e) => e.detail).join('; '), {
      extensions: { errors },
    });
  }
  if (environment !== undefined) filter.environment = environment;
  if (method !== undefined) filter.method = method;
  if (statusCode !== undefined) filter.statusCode = statusCode;
  if (consumer !== undefined) filter.consumer = consumer;
  if (limit !== undefined) filter.limit = limit;
  return filter;
}
