// What a request asks to do, in the authoriser's terms: the attributes the API server's
// RequestInfoFactory derives from the method, path and query (kubernetes/apiserver
// pkg/endpoints/request/requestinfo.go, read from source):
//
// - `/api/<v>/...` and `/apis/<g>/<v>/...` with a resource are resource requests; every
//   other path (`/api`, `/apis/<g>/<v>`, `/openapi/v3`, `/version`, `/healthz`) is a
//   non-resource request whose verb is the lower-cased HTTP method (`get`, `post`).
// - Verbs: POST create, GET/HEAD get, PUT update, PATCH patch, DELETE delete. A GET
//   without a name is `list`, or `watch` when `watch` is set to anything but false/0;
//   a DELETE without a name is `deletecollection`. `/api/v1/watch/...` is a watch too.
// - `namespaces/<ns>/<resource>/...` names the namespace; `namespaces/<ns>` itself
//   (and its `status`, `finalize`) is the resource `namespaces` in namespace `<ns>`.
// - A list or watch with the field selector `metadata.name=<n>` gets the name `<n>`, so
//   RBAC `resourceNames` can grant watching one object.

export interface RequestAttributes {
  resourceRequest: boolean;
  verb: string;
  /** The URL path (what non-resource rules match). */
  path: string;
  apiGroup: string;
  apiVersion: string;
  namespace: string;
  resource: string;
  subresource: string;
  name: string;
}

const NAMESPACE_SUBRESOURCES = new Set(['status', 'finalize']);

function nonResource(method: string, path: string): RequestAttributes {
  return {
    resourceRequest: false,
    verb: method.toLowerCase(),
    path,
    apiGroup: '',
    apiVersion: '',
    namespace: '',
    resource: '',
    subresource: '',
    name: '',
  };
}

/** `metadata.name=<n>` (or `==`) among the selector's terms, else undefined. */
function exactName(fieldSelector: string | null): string | undefined {
  if (!fieldSelector) return undefined;
  for (const term of fieldSelector.split(',')) {
    const m = /^\s*metadata\.name\s*==?\s*(.*?)\s*$/.exec(term);
    // path.IsValidPathSegmentName: no '/', '%', and not '.' or '..'.
    if (m && m[1] && !/[/%]/.test(m[1]) && m[1] !== '.' && m[1] !== '..') return m[1];
  }
  return undefined;
}

const VERBS: Record<string, string> = {
  POST: 'create',
  GET: 'get',
  HEAD: 'get',
  PUT: 'update',
  PATCH: 'patch',
  DELETE: 'delete',
};

/** The API group, version and the path parts after them; undefined for non-resource paths. */
function splitApiPath(
  parts: string[],
): { apiGroup: string; apiVersion: string; rest: string[] } | undefined {
  if (parts[0] === 'api' && parts.length >= 3)
    return { apiGroup: '', apiVersion: parts[1] ?? '', rest: parts.slice(2) };
  if (parts[0] === 'apis' && parts.length >= 4)
    return { apiGroup: parts[1] ?? '', apiVersion: parts[2] ?? '', rest: parts.slice(3) };
  return undefined;
}

/** `namespaces/<ns>/...`: the namespace and the parts from the resource on. */
function splitNamespace(rest: string[]): { namespace: string; rest: string[] } {
  if (rest[0] !== 'namespaces' || rest.length <= 1) return { namespace: '', rest };
  const namespace = rest[1] ?? '';
  if (rest.length > 2 && !NAMESPACE_SUBRESOURCES.has(rest[2] ?? ''))
    return { namespace, rest: rest.slice(2) };
  return { namespace, rest };
}

export function requestAttributes(
  method: string,
  path: string,
  query: URLSearchParams,
): RequestAttributes {
  const api = splitApiPath(path.split('/').filter(Boolean));
  if (!api) return nonResource(method, path);
  let verb = VERBS[method] ?? '';
  let parts = api.rest;
  // The deprecated /watch/ prefix.
  if (parts[0] === 'watch' && verb === 'get') {
    verb = 'watch';
    parts = parts.slice(1);
  }
  const { namespace, rest } = splitNamespace(parts);
  let name = rest[1] ?? '';
  if (name === '' && verb === 'get') {
    const watch = query.get('watch');
    verb = watch !== null && !['false', '0'].includes(watch.toLowerCase()) ? 'watch' : 'list';
    name = exactName(query.get('fieldSelector')) ?? '';
  }
  if (name === '' && verb === 'delete') verb = 'deletecollection';
  return {
    resourceRequest: true,
    verb,
    path,
    apiGroup: api.apiGroup,
    apiVersion: api.apiVersion,
    namespace,
    resource: rest[0] ?? '',
    subresource: rest[2] ?? '',
    name,
  };
}
