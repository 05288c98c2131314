// The engine's view of a trigger, made from the route record the gateway serves.
import type { RouteRecord } from '../../api/records/records.ts';
import type { TriggerRef } from './ports.ts';

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
