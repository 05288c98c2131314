// The compiled input and output validators of deployed routes, and the 422 answer of
// a body that fails its input schema. Compilation itself is the contract's
// (api/schemas.ts): the operator uses it to admit a trigger, the gateway to serve it.
import { compileSchemas, type CompiledSchemas, type ValidateFn } from '../../../api/schemas.ts';
import type { RouteRecord } from '../../../api/records/records.ts';
import { HttpProblem } from '../../errors.ts';
import { isJson, parseMediaType } from './parse.ts';

/**
 * Throws 422 schema-validation-failed listing every violation; does nothing without a
 * validator. `contentType` is the request's ('' when it sent none): a body (not an empty
 * one) that was not read as JSON says how it was read.
 */
export function validateInput(
  validate: ValidateFn | undefined,
  body: unknown,
  contentType?: string,
): void {
  if (!validate) return;
  const errors = validate(body);
  if (errors.length === 0) return;
  throw new HttpProblem(
    'HG_ERR_SCHEMA_VALIDATION',
    `The request body does not match the input schema (${errors.length} ${errors.length === 1 ? 'problem' : 'problems'}).${body === null ? '' : readAs(contentType)}`,
    { extensions: { errors } },
  );
}

/**
 * How a body that was not JSON was read: `curl -d '{...}'` without a Content-Type
 * sends a form, whose one field is the whole JSON text, and "orderId is required"
 * alone would not say why.
 */
function readAs(contentType: string | undefined): string {
  if (contentType === undefined) return '';
  // The body parser's own reading (parse.ts): every */*+json is JSON, not only application/.
  const media = parseMediaType(contentType)?.essence ?? '';
  if (isJson(media)) return '';
  // Cut as the charset message is: the header is the caller's, up to its size limit.
  const shown = media.length > 60 ? `${media.slice(0, 60)}…` : media;
  const read = media === '' ? 'without a Content-Type' : `as ${shown} (its Content-Type)`;
  return ` The body was read ${read}, not as JSON; a JSON body needs Content-Type: application/json.`;
}

/**
 * Compiled validators by route record. The route table keeps one record object per
 * route for as long as the route is unchanged (route-table.ts), so each route version
 * is compiled once, and its validators go when the table drops the record.
 */
const compiled = new WeakMap<RouteRecord, CompiledSchemas>();

/**
 * The validators of a route, compiled on first use and kept with its record. A route
 * whose schema configuration is unusable (it should not have been deployed) answers 500.
 */
export function schemasFor(route: RouteRecord): CompiledSchemas {
  const cached = compiled.get(route);
  if (cached) return cached;
  const schemas = compileSchemas(route.spec.schema);
  if ('error' in schemas) {
    throw new HttpProblem(
      'HG_ERR_INTERNAL',
      'The schema configuration of this endpoint is invalid.',
    );
  }
  compiled.set(route, schemas);
  return schemas;
}
