// Kubernetes `Status` error bodies (apimachinery pkg/api/errors), thrown as ApiError
// by the handlers and written by the server. Every error the server answers is one.

export interface StatusCause {
  reason?: string;
  message: string;
  field?: string;
}

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  causes?: StatusCause[];
  retryAfterSeconds?: number;
}

export interface StatusBody {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, unknown>;
  status: 'Failure' | 'Success';
  message: string;
  reason?: string;
  details?: StatusDetails;
  code: number;
}

/** An error answered as a `Status` body with its HTTP code. */
export class ApiError extends Error {
  readonly status: StatusBody;
  constructor(status: StatusBody) {
    super(status.message);
    this.status = status;
  }
  get code(): number {
    return this.status.code;
  }
}

/** A group/resource pair as used in error messages: `webhooktriggers.hookgate.dev`. */
export interface GroupResource {
  group: string;
  plural: string;
}

function qualified(gr: GroupResource): string {
  return gr.group ? `${gr.plural}.${gr.group}` : gr.plural;
}

function failure(
  code: number,
  reason: string | undefined,
  message: string,
  details?: StatusDetails,
): ApiError {
  const body: StatusBody = {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    ...(reason ? { reason } : {}),
    ...(details ? { details } : {}),
    code,
  };
  return new ApiError(body);
}

function resourceDetails(gr: GroupResource, name: string): StatusDetails {
  return { name, ...(gr.group ? { group: gr.group } : {}), kind: gr.plural };
}

export function notFound(gr: GroupResource, name: string): ApiError {
  return failure(
    404,
    'NotFound',
    `${qualified(gr)} "${name}" not found`,
    resourceDetails(gr, name),
  );
}

export function alreadyExists(gr: GroupResource, name: string): ApiError {
  return failure(
    409,
    'AlreadyExists',
    `${qualified(gr)} "${name}" already exists`,
    resourceDetails(gr, name),
  );
}

/** K2: the optimistic-concurrency conflict, byte for byte as apimachinery words it. */
export function conflict(gr: GroupResource, name: string, why?: string): ApiError {
  const reason =
    why ??
    'the object has been modified; please apply your changes to the latest version and try again';
  return failure(
    409,
    'Conflict',
    `Operation cannot be fulfilled on ${qualified(gr)} "${name}": ${reason}`,
    resourceDetails(gr, name),
  );
}

/** 422 Invalid with one cause per field error (`Kind.group "name" is invalid: ...`). */
export function invalid(
  kind: { group: string; kind: string },
  name: string,
  causes: { field: string; message: string; reason: string }[],
): ApiError {
  const qualifiedKind = kind.group ? `${kind.kind}.${kind.group}` : kind.kind;
  const parts = causes.map((c) => (c.field ? `${c.field}: ${c.message}` : c.message));
  const aggregate = parts.length === 1 ? (parts[0] ?? '') : `[${parts.join(', ')}]`;
  return failure(422, 'Invalid', `${qualifiedKind} "${name}" is invalid: ${aggregate}`, {
    name,
    ...(kind.group ? { group: kind.group } : {}),
    kind: kind.kind,
    causes: causes.map((c) => ({ reason: c.reason, message: c.message, field: c.field })),
  });
}

/** 401 as the authentication filter answers it (apiserver endpoints/handlers/responsewriters). */
export function unauthorized(): ApiError {
  return failure(401, 'Unauthorized', 'Unauthorized');
}

/**
 * 403 as apimachinery's NewForbidden words it: `<resource>.<group> "<name>" is
 * forbidden: <message>`, `<resource>.<group> is forbidden: …` without a name, and
 * `forbidden: …` for a non-resource path; details name the group, resource and name.
 */
export function forbidden(gr: GroupResource | undefined, name: string, message: string): ApiError {
  if (!gr || gr.plural === '') return failure(403, 'Forbidden', `forbidden: ${message}`, {});
  const prefix = name ? `${qualified(gr)} ${JSON.stringify(name)}` : qualified(gr);
  return failure(403, 'Forbidden', `${prefix} is forbidden: ${message}`, {
    ...(name ? { name } : {}),
    ...(gr.group ? { group: gr.group } : {}),
    kind: gr.plural,
  });
}

export function badRequest(message: string): ApiError {
  return failure(400, 'BadRequest', message);
}

export function unprocessable(message: string): ApiError {
  return failure(422, undefined, message);
}

export function unsupportedMediaType(contentType: string, accepted: string[]): ApiError {
  return failure(
    415,
    'UnsupportedMediaType',
    `the body of the request was in an unknown format - accepted media types include: ${accepted.join(', ')}`,
    { kind: contentType },
  );
}

export function methodNotAllowed(method: string): ApiError {
  return failure(
    405,
    'MethodNotAllowed',
    `the server does not allow this method on the requested resource (${method})`,
  );
}

/** K14: the watch-cache's answer for a resourceVersion that left the history window. */
export function expired(requested: number, oldest: number): ApiError {
  return resourceExpired(`too old resource version: ${requested} (${oldest})`);
}

/**
 * apimachinery NewResourceExpired: 410 Expired with the storage's message (a list at
 * a compacted resourceVersion, an expired continue token). `metadata` is the Status's
 * ListMeta: an expired continue token's answer carries one to resume with.
 */
export function resourceExpired(message: string, metadata: { continue?: string } = {}): ApiError {
  return new ApiError({
    kind: 'Status',
    apiVersion: 'v1',
    metadata,
    status: 'Failure',
    message,
    reason: 'Expired',
    code: 410,
  });
}

/**
 * apiserver storage/errors.go NewTooLargeResourceVersionError: apimachinery's
 * NewTimeoutError (504 Timeout, `Timeout: <message>`, retryAfterSeconds) with one
 * ResourceVersionTooLarge cause.
 */
export function tooLargeResourceVersion(
  requested: number | bigint,
  current: number,
  retryAfterSeconds: number,
): ApiError {
  return failure(
    504,
    'Timeout',
    `Timeout: Too large resource version: ${requested}, current: ${current}`,
    {
      causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }],
      retryAfterSeconds,
    },
  );
}

export function gone(message: string): ApiError {
  return failure(410, 'Gone', message);
}

/**
 * responsewriters ErrorToAPIStatus for an error that is no APIStatus (e.g. a
 * storage.InvalidError): 500 with the error's text and no reason (StatusReasonUnknown).
 */
export function notAnApiStatus(message: string): ApiError {
  return failure(500, undefined, message);
}

export function internalError(message: string): ApiError {
  return failure(500, 'InternalError', `Internal error occurred: ${message}`, {
    causes: [{ message }],
  });
}

/** A Status for an arbitrary code, used by the fault switches. */
export function forcedError(code: number, gr: GroupResource, name: string): ApiError {
  if (code === 409) return conflict(gr, name);
  if (code === 410) return gone('the resource version is too old (forced by a test fault)');
  if (code === 404) return notFound(gr, name);
  return failure(
    code,
    code >= 500 ? 'InternalError' : 'BadRequest',
    `forced ${code} by a test fault`,
  );
}
