// The engine's view of a trigger, made from the route record the gateway serves.
import type { RouteRecord } from '../../api/records/records.ts';
import type { AttemptSecrets } from './callbacks.ts';
import type { StartRequest, TriggerRef } from './ports.ts';

/** The names of a route's trigger; its spec and credentials are left behind. */
export function triggerRef(route: RouteRecord): TriggerRef {
  return {
    key: route.key,
    namespace: route.namespace,
    name: route.name,
    workflowId: route.workflowId,
    path: route.path,
  };
}

/**
 * The route's own callback signing secrets, for a start request that has a callback URL;
 * nothing when the trigger has none (the engine's secrets sign). An engine that reads
 * the route at each delivery attempt (`InProcessEngineOptions.routes`) signs with the
 * route's secrets of then instead.
 */
export function callbackSigning(route: RouteRecord): Pick<StartRequest, 'callbackSecrets'> {
  const secrets = route.credentials.callbackSecrets;
  return secrets?.length ? { callbackSecrets: secrets } : {};
}

/**
 * What signs a callback attempt of trigger `key`, from its route record as it is at that
 * attempt: the trigger's own secrets, the engine's (an empty list: it has none), or why
 * the attempt cannot be signed (the route is gone: the trigger was deleted, or the
 * operator took it down: deploy false, its workflow gone, its spec or Secret invalid, a
 * path conflict).
 */
export function callbackSecretsOf(key: string, route: RouteRecord | undefined): AttemptSecrets {
  if (!route) return { unsigned: `endpoint ${key} is no longer deployed` };
  return route.credentials.callbackSecrets ?? [];
}
