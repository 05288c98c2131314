// The WebhookTrigger controller: writes the trigger's route to the route store (the
// Deploy action) when its spec is valid, its Workflow exists and no older trigger
// serves the same URL, and reports Valid, Deployed (every live gateway serves the
// route's generation: served.ts), WorkflowPublished and Ready. Status is written on
// every exit path: a store that fails leaves Ready=False/StoreError behind, and the
// error is returned so the reconcile is retried with backoff. One exit writes none: the
// route store holding the route of a later generation of the trigger, which a write
// from this older look may not replace or delete (SupersededRecordError, ADR 0051).
import { isDeepStrictEqual } from 'node:util';
import {
  Reason,
  TriggerCondition,
  type WebhookTriggerSpec,
  type WebhookTriggerStatus,
} from '../../api/v1alpha1/index.ts';
import type { GatewayStore } from '../../api/records/gateways.ts';
import {
  SupersededRecordError,
  type ResolvedCredentials,
  type RouteRecord,
  type RouteStore,
  type WorkflowRegistry,
} from '../../api/records/records.ts';
import { basePath, routePath, webhookUrl, workflowIdentifier } from '../../api/identity.ts';
import { compileSchemas } from '../../api/schemas.ts';
import { checkTrigger } from '../../api/trigger-check.ts';
import type { ObjectRef, ResourceSource } from '../sources/ports.ts';
import {
  mergeConditions,
  notOk,
  ok,
  problemsMessage,
  storeError,
  summarize,
  type ConditionInput,
} from './conditions.ts';
import { resolveCredentials } from './credentials.ts';
import type { PathClaims } from './path-claims.ts';
import { RecheckBackoff } from './recheck.ts';
import { workflowOf, type Trigger, type WorkflowResource } from './resources.ts';
import {
  publishedOnGateways,
  servedCondition,
  type Deployment,
  type RecheckOptions,
} from './served.ts';
import type { RecordEvent, StatusWriter } from './status.ts';
import { cleanupFailed, isStoreError } from './store-errors.ts';
import { hasRespondNode } from '../../api/workflow-check.ts';

export interface TriggerReconcilerOptions {
  source: ResourceSource;
  routes: RouteStore;
  /** Read only: whether the trigger's workflow is registered with the engine. */
  workflows: WorkflowRegistry;
  /** Read only: what the live gateways serve. */
  gateways: Pick<GatewayStore, 'served'>;
  /** Public base URL of the gateway, e.g. https://hooks.example.com */
  baseUrl: string;
  claims: PathClaims;
  status: StatusWriter;
  now: () => Date;
  recordEvent: RecordEvent;
  recheck?: RecheckOptions;
}

export class TriggerReconciler {
  readonly #o: TriggerReconcilerOptions;
  /** How long each trigger waiting for the gateways waits before its next look. */
  readonly #rechecks: RecheckBackoff;

  constructor(options: TriggerReconcilerOptions) {
    this.#o = options;
    this.#rechecks = new RecheckBackoff(options.recheck?.maxMs);
  }

  /**
   * What the gateways serve changed for these trigger keys (all of them when
   * undefined): their next recheck waits the first delay again.
   */
  servedChanged(keys?: readonly string[]): void {
    if (keys === undefined) this.#rechecks.resetAll();
    else for (const key of keys) this.#rechecks.reset(key);
  }

  async reconcile(ref: ObjectRef): Promise<{ requeueAfterMs: number } | void> {
    const { source, claims } = this.#o;
    const key = `${ref.namespace}/${ref.name}`;
    const trigger = source.get(ref) as Trigger | undefined;
    if (!trigger || trigger.metadata.deletionTimestamp) return this.#cleanUp(ref, key, trigger);
    const generation = trigger.metadata.generation ?? 1;
    const previous = await this.#o.status.initial<WebhookTriggerStatus>(
      ref,
      trigger,
      TriggerCondition,
    );
    if (!(await source.addFinalizer(ref, trigger.metadata.uid))) {
      // Gone or being deleted since the cache said otherwise: nothing may be deployed
      // for it (O6). Its route goes, as on a delete; the event of the deletion brings
      // the rest (the Event, our finalizer if it is there).
      return this.#cleanUp(ref, key, undefined);
    }

    const spec = trigger.spec;
    const workflow = workflowOf(source, ref.namespace, trigger);
    const workflowId =
      workflow &&
      workflowIdentifier(ref.namespace, workflow.spec.environment, workflow.metadata.name);
    const status: WebhookTriggerStatus = { observedGeneration: generation };
    if (workflowId) {
      status.workflowId = workflowId;
      status.basePath = basePath(workflowId);
      status.url = webhookUrl(this.#o.baseUrl, workflowId, spec.pathSegment);
      claims.update(trigger);
    }

    // Every store call below may fail: its condition says so, status is still written.
    const failures: unknown[] = [];
    const failed = (type: string, what: string) => (err: unknown) => {
      failures.push(err);
      return storeError(type, what, err);
    };
    const { valid, credentials } = this.#validity(ref, spec, workflow);
    const registered = await this.#workflowPublished(ref, workflow, workflowId).catch(
      failed(TriggerCondition.WorkflowPublished, 'Cannot read the workflow registry'),
    );
    const blocker = this.#deployBlocker(trigger, workflow, workflowId, valid, status.url);
    const deployment: Deployment = await (
      blocker || !workflow || !workflowId
        ? this.#undeploy(trigger, key, blocker)
        : this.#deploy(trigger, workflow, workflowId, credentials)
    ).catch((err: unknown) => ({
      deployed: failed(TriggerCondition.Deployed, 'Cannot deploy the route')(err),
    }));
    // The store holds the route of a later generation of this trigger (a newer look at
    // it: the new leader's, written while this replica has not noticed it lost the
    // Lease, or this cache is behind): the status computed here is of the older look
    // too, and is not written. The reconcile fails and runs again from what is there.
    const superseded = failures.find((err) => err instanceof SupersededRecordError);
    if (superseded) throw superseded;
    const { deployed } = deployment;
    const { published, recheckMs } = publishedOnGateways(registered, deployment, this.#o.recheck);

    // A store failure, then a conflict or a missing workflow: the most useful first.
    const first =
      [deployed, published].find(isStoreError) ??
      (deployed.reason === Reason.PathConflict ? deployed : undefined);
    const parts = [valid, deployed, published];
    const ordered = first ? [first, ...parts.filter((c) => c !== first)] : parts;
    const ready = summarize(TriggerCondition.Ready, ordered, `Ready at ${status.url ?? ''}`);
    status.conditions = mergeConditions(
      previous.conditions,
      [valid, deployed, published, ready],
      generation,
      this.#o.now(),
    );
    await this.#o.status.write(ref, trigger, previous, status);
    this.#announceMove(trigger, previous.url, status.url);
    if (failures.length > 0 || !recheckMs) {
      this.#rechecks.reset(key);
      if (failures.length > 0) throw failures[0];
      return undefined;
    }
    // Waiting for the gateways: later each time while nothing about the wait changes.
    const waitingIn = [generation, deployed.reason, deployed.message, published.message].join('\n');
    return { requeueAfterMs: this.#rechecks.next(key, waitingIn, recheckMs) };
  }

  /**
   * A URL never moves silently: when the published URL changes (a new path segment or
   * workflow, another base URL, or the identifier scheme of ADR 0022 after an upgrade),
   * a Warning Event names the old and the new URL; status already shows the new one.
   */
  #announceMove(trigger: Trigger, before: string | undefined, after: string | undefined): void {
    if (before === undefined || after === undefined || before === after) return;
    this.#o.recordEvent(
      trigger,
      'Warning',
      'WebhookUrlChanged',
      `The webhook URL moved from ${before} to ${after}; callers of the old URL get 404 route-not-found`,
    );
  }

  /** The trigger is gone or being deleted: remove its route, then its finalizer. */
  async #cleanUp(ref: ObjectRef, key: string, trigger: Trigger | undefined): Promise<void> {
    const { source, routes, claims } = this.#o;
    try {
      await routes.delete(key);
    } catch (err) {
      if (!trigger) throw err;
      return cleanupFailed(
        this.#o.status,
        ref,
        trigger,
        'Cannot remove the route',
        err,
        this.#o.now(),
      );
    }
    claims.release(key);
    this.#rechecks.reset(key);
    if (trigger) {
      this.#o.recordEvent(trigger, 'Normal', 'CleanedUp', 'Route removed from the gateway');
      await source.removeFinalizer(ref, trigger.metadata.uid);
    }
  }

  /**
   * The route must not be served (`blocker` says why): take it out of the store, unless
   * it is the route of a later generation of the trigger (SupersededRecordError).
   */
  async #undeploy(
    trigger: Trigger,
    key: string,
    blocker: ConditionInput | undefined,
  ): Promise<Deployment> {
    const writer = writtenFor(trigger);
    if (!(await this.#o.routes.deleteUnlessSuperseded(key, writer))) {
      throw new SupersededRecordError('The route', key, writer);
    }
    return {
      deployed:
        blocker ?? notOk(TriggerCondition.Deployed, Reason.WorkflowNotFound, 'Workflow not found'),
    };
  }

  /**
   * Write the route (when it changed, and unless the store holds the route of a later
   * generation of the trigger: SupersededRecordError), then see whether the gateways
   * serve it.
   */
  async #deploy(
    trigger: Trigger,
    workflow: WorkflowResource,
    workflowId: string,
    credentials: ResolvedCredentials,
  ): Promise<Deployment> {
    const { routes } = this.#o;
    const namespace = trigger.metadata.namespace ?? 'default';
    const key = `${namespace}/${trigger.metadata.name}`;
    const route: RouteRecord = {
      key,
      namespace,
      name: trigger.metadata.name,
      uid: trigger.metadata.uid ?? '',
      generation: trigger.metadata.generation ?? 1,
      workflowId,
      path: routePath(workflowId, trigger.spec.pathSegment),
      application: workflow.spec.application,
      environment: workflow.spec.environment,
      spec: trigger.spec,
      credentials,
    };
    const existing = await routes.get(key);
    if (!isDeepStrictEqual(existing, route) && !(await routes.putUnlessSuperseded(key, route))) {
      throw new SupersededRecordError('The route', key, route);
    }
    return servedCondition(this.#o.gateways, route, this.#o.recheck);
  }

  /** Valid: what the CRD schema cannot check (Secrets, schema JSON, the respond node). */
  #validity(
    ref: ObjectRef,
    spec: WebhookTriggerSpec,
    workflow: WorkflowResource | undefined,
  ): { valid: ConditionInput; credentials: ResolvedCredentials } {
    const type = TriggerCondition.Valid;
    const compiled = compileSchemas(spec.schema);
    if ('error' in compiled) {
      return { valid: notOk(type, Reason.InvalidSpec, compiled.error), credentials: {} };
    }
    const unreachable = checkTrigger(spec);
    if (unreachable.length > 0) {
      return {
        valid: notOk(type, Reason.InvalidSpec, problemsMessage(unreachable)),
        credentials: {},
      };
    }
    const { source } = this.#o;
    const credentials = resolveCredentials(spec, (name) => source.getSecret(ref.namespace, name), {
      namespace: ref.namespace,
      selector: source.secretSelector,
      watched: source.secretsWatchedIn?.(ref.namespace) ?? true,
      forbidden: source.secretsForbiddenIn?.(ref.namespace),
    });
    if (!credentials.ok) {
      return { valid: notOk(type, credentials.reason, credentials.message), credentials: {} };
    }
    if (
      spec.response.mode === 'waitForResponseNode' &&
      workflow &&
      !hasRespondNode(workflow.spec)
    ) {
      const message = `response mode waitForResponseNode needs a respond node in workflow "${workflow.metadata.name}"`;
      return { valid: notOk(type, Reason.NoResponseNode, message), credentials: {} };
    }
    return {
      valid: ok(type, Reason.Succeeded, 'Spec is valid'),
      credentials: credentials.credentials,
    };
  }

  /** Why the route must not be deployed, or undefined when it may be. */
  #deployBlocker(
    trigger: Trigger,
    workflow: WorkflowResource | undefined,
    workflowId: string | undefined,
    valid: ConditionInput,
    url: string | undefined,
  ): ConditionInput | undefined {
    const type = TriggerCondition.Deployed;
    if (!workflow || !workflowId) {
      return notOk(
        type,
        Reason.WorkflowNotFound,
        `Workflow "${trigger.spec.workflowRef.name}" not found`,
      );
    }
    if (valid.status !== 'True')
      return notOk(type, valid.reason, 'Not deployed: the spec is not valid');
    if (!trigger.spec.deploy) return notOk(type, Reason.DeployDisabled, 'spec.deploy is false');
    const rival = this.#o.claims.olderRival(trigger, workflowId);
    if (rival)
      return notOk(
        type,
        Reason.PathConflict,
        `${url} is already served by WebhookTrigger ${rival}`,
      );
    return undefined;
  }

  /** WorkflowPublished: the engine has the trigger's workflow, under this trigger's namespace. */
  async #workflowPublished(
    ref: ObjectRef,
    workflow: WorkflowResource | undefined,
    workflowId: string | undefined,
  ): Promise<ConditionInput> {
    const type = TriggerCondition.WorkflowPublished;
    if (!workflow || !workflowId)
      return notOk(
        type,
        Reason.WorkflowNotFound,
        `Workflow not found in namespace ${ref.namespace}`,
      );
    if (!workflow.spec.publish) {
      return notOk(
        type,
        Reason.PublishDisabled,
        `Workflow "${workflow.metadata.name}" is not published (spec.publish is false)`,
      );
    }
    const registration = await this.#o.workflows.get(workflowId);
    if (
      !registration ||
      registration.namespace !== ref.namespace ||
      registration.name !== workflow.metadata.name
    ) {
      return notOk(
        type,
        Reason.WorkflowNotReady,
        `Workflow "${workflow.metadata.name}" is not registered with the engine yet`,
      );
    }
    return ok(type, Reason.Published, `Workflow ${workflowId} is published`);
  }
}

/** The trigger's uid and generation, which a route written for it carries. */
function writtenFor(trigger: Trigger): { uid: string; generation: number } {
  return { uid: trigger.metadata.uid ?? '', generation: trigger.metadata.generation ?? 1 };
}
