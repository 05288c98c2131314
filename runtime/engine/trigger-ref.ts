// The engine's view of a trigger, made from the route record the gateway serves.
import type { RouteRecord } from '../../api/records/records.ts';
import type { AttemptSecrets } from './callbacks.ts';
import type { Execution, StartRequest, TriggerRef } from './ports.ts';

/**
 * The names of a route's trigger, and its uid (none when the route has none); its spec
 * and credentials are left behind.
 */
export function triggerRef(route: RouteRecord): TriggerRef {
  return {
    key: route.key,
    namespace: route.namespace,
    name: route.name,
    workflowId: route.workflowId,
    path: route.path,
    ...(route.uid ? { uid: route.uid } : {}),
  };
}

/**
 * The trigger of an execution accepted earlier (a worker's job), run with `route` as it
 * is now: the route's names, and the uid the execution was accepted under, not the
 * route's (none when the record has none: written before uids were kept).
 */
export function acceptedTriggerRef(
  route: RouteRecord,
  execution: Pick<Execution, 'triggerUid'>,
): TriggerRef {
  const { uid: _now, ...names } = triggerRef(route);
  return execution.triggerUid ? { ...names, uid: execution.triggerUid } : names;
}

/**
 * Whether `route` is the trigger `uid` names, not another WebhookTrigger created under
 * the same name since. Not checked (true) when either has no uid: an execution written
 * before uids were kept, a route from a source that gives none.
 */
export function sameTrigger(uid: string | undefined, route: RouteRecord): boolean {
  return !uid || !route.uid || uid === route.uid;
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
 * What signs a callback attempt of `trigger`'s run, from its route record as it is at
 * that attempt: the trigger's own secrets, the engine's (an empty list: it has none), or
 * why the attempt cannot be signed (the route is gone: the trigger was deleted, or the
 * operator took it down: deploy false, its workflow gone, its spec or Secret invalid, a
 * path conflict; or the route is another trigger's: deleted and re-created under the
 * same name, with another uid).
 */
export function callbackSecretsOf(
  trigger: Pick<TriggerRef, 'key' | 'uid'>,
  route: RouteRecord | undefined,
): AttemptSecrets {
  if (!route) return { unsigned: `endpoint ${trigger.key} is no longer deployed` };
  if (!sameTrigger(trigger.uid, route)) return { unsigned: recreated(trigger.key) };
  return route.credentials.callbackSecrets ?? [];
}

/** Why an attempt is not signed when its trigger was re-created (the reason recorded). */
function recreated(key: string): string {
  return `endpoint ${key} was deleted and re-created since this run started (another WebhookTrigger uid)`;
}
