// Which namespaces a request's user may read webhook triggers in, as a predicate the
// stores apply while they walk a listing, before they cut its page (an access filter
// applied after the cut gave short or empty pages, and a cursor naming what the user
// may not read).
import type { FastifyRequest } from 'fastify';
import type { AdminAccess } from '../admin/access.ts';

/**
 * Whether the user may `get` webhooktriggers in a namespace, each namespace asked once
 * (a SubjectAccessReview) however many of its items a listing passes. Undefined when
 * they may read all: no authenticator (the dev server), or a cluster-wide `list`.
 */
export async function readableNamespaces(
  access: AdminAccess,
  request: FastifyRequest,
): Promise<((namespace: string) => Promise<boolean>) | undefined> {
  if (!access.enabled) return undefined;
  if (await access.allowed(request, { verb: 'list', resource: 'webhooktriggers' }))
    return undefined;
  const namespaces = new Map<string, Promise<boolean>>();
  return (namespace) => {
    let allowed = namespaces.get(namespace);
    if (!allowed) {
      allowed = access.allowed(request, { verb: 'get', resource: 'webhooktriggers', namespace });
      namespaces.set(namespace, allowed);
    }
    return allowed;
  };
}
