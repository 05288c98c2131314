// The engine's view of a trigger, made from the route record the gateway serves.
import type { RouteRecord } from '../../api/records/records.ts';
import type { AttemptSecrets } from './callbacks.ts';
import { NO_NAMESPACE } from './fair-queue.ts';
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
 * What of `route` signs the callbacks of a run of the trigger `uid` names.
 * `secrets`: the route is that trigger's, and these are its own (none: the engine's
 * sign). `unsigned`: nothing of it signs for that run, neither its secrets nor, for a
 * run with secrets of its own, the engine's: there is no route (`gone`), or it is another
 * WebhookTrigger created under the same name since (`recreated`: another uid).
 * Not checked (the route signs) when either has no uid: an execution written before uids
 * were kept, a route from a source that gives none.
 *
 * The one rule against a re-created trigger (ADR 0035, ADR 0018): a worker does not run
 * a job of it (worker.ts), a callback attempt is not signed with its secrets
 * (callbackSecretsOf), a replay or dead-letter retry is refused unless asked, then sent
 * without the callback (read-api/replay.ts).
 */
export type RunSigning = { secrets: readonly string[] } | { unsigned: 'gone' | 'recreated' };

export function runSigning(uid: string | undefined, route: RouteRecord | undefined): RunSigning {
  if (!route) return { unsigned: 'gone' };
  if (uid && route.uid && uid !== route.uid) return { unsigned: 'recreated' };
  return { secrets: route.credentials.callbackSecrets ?? [] };
}

/**
 * The route's own callback signing secrets (of the route a request came in on, or as
 * runSigning gives them for a run accepted earlier), for a start request that has a
 * callback URL; nothing when the trigger has none (the engine's secrets sign). An engine
 * that reads the route at each delivery attempt (`InProcessEngineOptions.routes`) signs
 * with the route's secrets of then instead.
 */
export function callbackSigning(
  from: RouteRecord | { secrets: readonly string[] },
): Pick<StartRequest, 'callbackSecrets'> {
  const secrets = 'secrets' in from ? from.secrets : from.credentials.callbackSecrets;
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
  const signing = runSigning(trigger.uid, route);
  if ('secrets' in signing) return signing.secrets;
  return {
    unsigned:
      signing.unsigned === 'gone'
        ? `endpoint ${trigger.key} is no longer deployed`
        : recreated(trigger.key),
  };
}

/** Why an attempt is not signed when its trigger was re-created (the reason recorded). */
function recreated(key: string): string {
  return `endpoint ${key} was deleted and re-created since this run started (another WebhookTrigger uid)`;
}

/**
 * The namespace whose run slots an execution of `trigger` counts against (ADR 0049): its
 * trigger's, or NO_NAMESPACE (one bucket of their own) for a trigger without one.
 */
export function slotNamespace(trigger: Pick<TriggerRef, 'namespace'>): string {
  return trigger.namespace || NO_NAMESPACE;
}

/** The namespace of a trigger key (`<namespace>/<name>`), as slotNamespace gives it. */
export function slotNamespaceOfKey(triggerKey: string): string {
  const slash = triggerKey.indexOf('/');
  return slash > 0 ? triggerKey.slice(0, slash) : NO_NAMESPACE;
}
