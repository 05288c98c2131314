// The engine's view of a trigger, made from the route record the gateway serves.
import type { RouteRecord } from '../../api/records/records.ts';
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
 * nothing when the trigger has none (the engine's secrets sign).
 */
export function callbackSigning(route: RouteRecord): Pick<StartRequest, 'callbackSecrets'> {
  const secrets = route.credentials.callbackSecrets;
  return secrets?.length ? { callbackSecrets: secrets } : {};
}
