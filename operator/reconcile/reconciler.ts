// The reconcile core, shared by the embedded server and the operator.
//
// Level-based and idempotent: `reconcile(ref)` reads the current state of the world
// (resource cache, route store, registry), makes the stores match the spec, and
// writes status once, only when it changed. It never looks at what event led here.
import { isDeepStrictEqual } from 'node:util';
import {
  TriggerCondition,
  WorkflowCondition,
  Reason,
  type Condition,
  type WebhookTriggerSpec,
  type WebhookTriggerStatus,
  type WorkflowSpec,
  type WorkflowStatus,
} from '../../api/v1alpha1/index.ts';
import type {
  ResolvedCredentials,
  RouteRecord,
  RouteStore,
  WorkflowRegistration,
  WorkflowRegistry,
} from '../../api/records/records.ts';
import type { AnyResource, ObjectRef, ResourceSource } from '../sources/ports.ts';
import { mergeConditions, summarize, type ConditionInput } from './conditions.ts';
import { referencedSecrets, resolveCredentials } from './credentials.ts';
import {
  basePath,
  pathShape,
  routePath,
  webhookUrl,
  workflowIdentifier,
} from '../../api/identity.ts';
import { compileSchemas } from '../../api/schemas.ts';
import { checkWorkflow, hasRespondNode } from './workflow-check.ts';

export interface ReconcilerOptions {
  source: ResourceSource;
  routes: RouteStore;
  workflows: WorkflowRegistry;
  /** Public base URL of the gateway, e.g. https://hooks.example.com */
  baseUrl: string;
  now?: () => Date;
  /**
   * Ask for an object to be reconciled later. Called when a workflow's registration
   * changes, so its triggers see it (the registry is not a watched resource).
   */
  enqueue?: (ref: ObjectRef) => void;
  /** Kubernetes Events: told when an object's Ready condition changes, and on cleanup. */
  recordEvent?: (
    obj: AnyResource,
    type: 'Normal' | 'Warning',
    reason: string,
    message: string,
  ) => void;
}

export interface ReconcileResult {
  requeueAfterMs?: number;
}

type Trigger = AnyResource & { spec: WebhookTriggerSpec; status?: WebhookTriggerStatus };
type WorkflowResource = AnyResource & { spec: WorkflowSpec; status?: WorkflowStatus };

const ok = (type: string, reason: string, message: string): ConditionInput => ({
  type,
  status: 'True',
  reason,
  message,
});
const notOk = (type: string, reason: string, message: string): ConditionInput => ({
  type,
  status: 'False',
  reason,
  message,
});

export class Reconciler {
  readonly #o: Required<ReconcilerOptions>;
  /**
   * The URL each trigger claims (its path shape), with its creation order: so conflicts
   * and the rivals of a changed or deleted trigger are found without scanning them all.
   */
  readonly #claims = new Map<string, { shape: string; order: string; active: boolean }>();
  readonly #byShape = new Map<string, Set<string>>();

  constructor(options: ReconcilerOptions) {
    this.#o = { now: () => new Date(), enqueue: () => {}, recordEvent: () => {}, ...options };
  }

  async reconcile(ref: ObjectRef): Promise<ReconcileResult | void> {
    if (ref.kind === 'Workflow') return this.#reconcileWorkflow(ref);
    if (ref.kind === 'WebhookTrigger') return this.#reconcileTrigger(ref);
    // Secrets are never reconciled themselves; their dependents are (see dependents()).
  }

  /** Objects to reconcile when `changed` was added, modified or removed. */
  dependents(changed: ObjectRef): ObjectRef[] {
    const { source } = this.#o;
    const current = source.get(changed);
    // Our own status or finalizer write: nothing that others depend on has changed.
    if (current && isSettled(current)) return [];
    if (changed.kind === 'Secret') {
      return (source.list('WebhookTrigger') as Trigger[])
        .filter(
          (t) =>
            t.metadata.namespace === changed.namespace &&
            referencedSecrets(t.spec).includes(changed.name),
        )
        .map(triggerRef);
    }
    if (changed.kind === 'Workflow') {
      const shapes = new Set<string>();
      const triggers = this.#triggersOf(changed);
      for (const t of triggers) this.#reindex(t, shapes);
      return [
        changed,
        ...triggers.map(triggerRef),
        ...this.#claimants(shapes, new Set(triggers.map(keyOf))),
      ];
    }
    // A trigger: itself, plus every trigger that wants (or wanted) the same URL.
    const key = `${changed.namespace}/${changed.name}`;
    const shapes = new Set<string>();
    const previous = this.#claims.get(key);
    if (previous) shapes.add(previous.shape);
    if (current) this.#reindex(current as Trigger, shapes);
    else this.#unindex(key);
    return [changed, ...this.#claimants(shapes, new Set([key]))];
  }

  /** Refresh one trigger's claim; collect its old and new shapes into `shapes`. */
  #reindex(t: Trigger, shapes: Set<string>): void {
    const key = keyOf(t);
    const old = this.#claims.get(key);
    if (old) shapes.add(old.shape);
    this.#unindex(key);
    const shape = this.#shapeOf(t);
    if (shape === undefined) return;
    shapes.add(shape);
    this.#claims.set(key, {
      shape,
      order: orderKey(t),
      active: !t.metadata.deletionTimestamp && t.spec.deploy,
    });
    let keys = this.#byShape.get(shape);
    if (!keys) this.#byShape.set(shape, (keys = new Set()));
    keys.add(key);
  }

  #unindex(key: string): void {
    const old = this.#claims.get(key);
    if (!old) return;
    this.#claims.delete(key);
    const keys = this.#byShape.get(old.shape);
    keys?.delete(key);
    if (keys?.size === 0) this.#byShape.delete(old.shape);
  }

  /** Triggers claiming any of `shapes`, except those in `skip`. */
  #claimants(shapes: Set<string>, skip: Set<string>): ObjectRef[] {
    const refs: ObjectRef[] = [];
    for (const shape of shapes) {
      for (const key of this.#byShape.get(shape) ?? []) {
        if (skip.has(key)) continue;
        skip.add(key);
        const [namespace = 'default', name = ''] = key.split('/');
        refs.push({ kind: 'WebhookTrigger', namespace, name });
      }
    }
    return refs;
  }

  // ---------------------------------------------------------------- workflows

  async #reconcileWorkflow(ref: ObjectRef): Promise<void> {
    const { source, workflows } = this.#o;
    const wf = source.get(ref) as WorkflowResource | undefined;
    if (!wf || wf.metadata.deletionTimestamp) {
      await this.#unregisterWorkflow(ref.namespace, ref.name, undefined);
      if (wf) {
        this.#o.recordEvent(wf, 'Normal', 'CleanedUp', 'Unregistered from the workflow engine');
        await source.removeFinalizer(ref);
      }
      return;
    }
    const generation = wf.metadata.generation ?? 1;
    const previous = (await this.#initialStatus(ref, wf, WorkflowCondition)) as WorkflowStatus;
    await source.addFinalizer(ref);

    const workflowId = workflowIdentifier(ref.namespace, wf.spec.environment, ref.name);
    const problems = checkWorkflow(wf.spec);
    const valid =
      problems.length === 0
        ? ok(WorkflowCondition.Valid, Reason.Succeeded, 'All nodes and expressions are valid')
        : notOk(WorkflowCondition.Valid, Reason.InvalidSpec, problems.join('; '));

    let published: ConditionInput;
    if (valid.status !== 'True') {
      published = notOk(
        WorkflowCondition.Published,
        Reason.InvalidSpec,
        'Not published: the workflow is invalid',
      );
    } else if (!wf.spec.publish) {
      published = notOk(
        WorkflowCondition.Published,
        Reason.PublishDisabled,
        'spec.publish is false',
      );
    } else {
      const registration: WorkflowRegistration = {
        workflowId,
        namespace: ref.namespace,
        name: ref.name,
        generation,
        application: wf.spec.application,
        environment: wf.spec.environment,
        spec: wf.spec,
      };
      const existing = await workflows.get(workflowId);
      if (existing && (existing.namespace !== ref.namespace || existing.name !== ref.name)) {
        // Slugging can map two names to one identifier; the first one keeps it.
        published = notOk(
          WorkflowCondition.Published,
          Reason.PathConflict,
          `workflow identifier ${workflowId} is already used by ${existing.namespace}/${existing.name}`,
        );
      } else {
        if (!isDeepStrictEqual(existing, registration)) {
          await workflows.put(workflowId, registration);
          this.#enqueueTriggersOf(ref);
        }
        published = ok(WorkflowCondition.Published, Reason.Published, `Published as ${workflowId}`);
      }
    }
    await this.#unregisterWorkflow(
      ref.namespace,
      ref.name,
      published.status === 'True' ? workflowId : undefined,
    );

    const ready = summarize(
      WorkflowCondition.Ready,
      [valid, published],
      `Published as ${workflowId}`,
    );
    const status: WorkflowStatus = {
      observedGeneration: generation,
      workflowId,
      conditions: mergeConditions(
        previous.conditions,
        [valid, published, ready],
        generation,
        this.#o.now(),
      ),
    };
    await this.#writeStatusIfChanged(ref, previous, status);
    this.#announce(wf, previous.conditions, status.conditions);
  }

  /** Remove this workflow's registrations except the one it should keep. */
  async #unregisterWorkflow(
    namespace: string,
    name: string,
    keep: string | undefined,
  ): Promise<void> {
    const { workflows } = this.#o;
    for (const reg of await workflows.list()) {
      if (reg.namespace === namespace && reg.name === name && reg.workflowId !== keep) {
        await workflows.delete(reg.workflowId);
        this.#enqueueTriggersOf({ kind: 'Workflow', namespace, name });
      }
    }
  }

  /** The workflow's registration changed: its triggers must look again. */
  #enqueueTriggersOf(workflow: ObjectRef): void {
    for (const t of this.#triggersOf(workflow)) this.#o.enqueue(triggerRef(t));
  }

  #triggersOf(workflow: ObjectRef): Trigger[] {
    return (this.#o.source.list('WebhookTrigger') as Trigger[]).filter(
      (t) =>
        t.metadata.namespace === workflow.namespace && t.spec.workflowRef.name === workflow.name,
    );
  }

  // ---------------------------------------------------------------- triggers

  async #reconcileTrigger(ref: ObjectRef): Promise<void> {
    const { source, routes } = this.#o;
    const key = `${ref.namespace}/${ref.name}`;
    const trigger = source.get(ref) as Trigger | undefined;
    if (!trigger || trigger.metadata.deletionTimestamp) {
      await routes.delete(key);
      this.#unindex(key);
      if (trigger) {
        this.#o.recordEvent(trigger, 'Normal', 'CleanedUp', 'Route removed from the gateway');
        await source.removeFinalizer(ref);
      }
      return;
    }
    const generation = trigger.metadata.generation ?? 1;
    const previous = (await this.#initialStatus(
      ref,
      trigger,
      TriggerCondition,
    )) as WebhookTriggerStatus;
    await source.addFinalizer(ref);

    const spec = trigger.spec;
    const workflow = source.get({
      kind: 'Workflow',
      namespace: ref.namespace,
      name: spec.workflowRef.name,
    }) as WorkflowResource | undefined;
    const workflowId =
      workflow &&
      workflowIdentifier(ref.namespace, workflow.spec.environment, workflow.metadata.name);
    const status: WebhookTriggerStatus = { observedGeneration: generation };
    if (workflowId) {
      status.workflowId = workflowId;
      status.basePath = basePath(workflowId);
      status.url = webhookUrl(this.#o.baseUrl, workflowId, spec.pathSegment);
      this.#reindex(trigger, new Set());
    }

    const { valid, credentials } = this.#validity(ref, spec, workflow);
    const published = await this.#workflowPublished(ref, workflow, workflowId);
    let deployed = this.#deployBlocker(trigger, workflow, workflowId, valid, status.url);
    if (!deployed && workflow && workflowId) {
      const route: RouteRecord = {
        key,
        namespace: ref.namespace,
        name: ref.name,
        uid: trigger.metadata.uid ?? '',
        generation,
        workflowId,
        path: routePath(workflowId, spec.pathSegment),
        application: workflow.spec.application,
        environment: workflow.spec.environment,
        spec,
        credentials,
      };
      const existing = await routes.get(key);
      if (!isDeepStrictEqual(existing, route)) await routes.put(key, route);
      deployed = ok(
        TriggerCondition.Deployed,
        Reason.Deployed,
        `Serving ${spec.methods.join(', ')} at ${route.path}`,
      );
    }
    if (!deployed || deployed.status !== 'True') await routes.delete(key);
    deployed ??= notOk(TriggerCondition.Deployed, Reason.WorkflowNotFound, 'Workflow not found');

    // A conflict or a missing workflow is the most useful thing to tell first.
    const ordered =
      deployed.reason === Reason.PathConflict
        ? [deployed, valid, published]
        : [valid, deployed, published];
    const ready = summarize(TriggerCondition.Ready, ordered, `Ready at ${status.url ?? ''}`);
    status.conditions = mergeConditions(
      previous.conditions,
      [valid, deployed, published, ready],
      generation,
      this.#o.now(),
    );
    await this.#writeStatusIfChanged(ref, previous, status);
    this.#announce(trigger, previous.conditions, status.conditions);
  }

  /** One Event when Ready changes status or reason: Normal when ready, Warning with the reason otherwise. */
  #announce(
    obj: AnyResource,
    before: Condition[] | undefined,
    after: Condition[] | undefined,
  ): void {
    const was = before?.find((c) => c.type === 'Ready');
    const now = after?.find((c) => c.type === 'Ready');
    if (
      !now ||
      now.status === 'Unknown' ||
      (was?.status === now.status && was.reason === now.reason)
    )
      return;
    if (now.status === 'True') this.#o.recordEvent(obj, 'Normal', 'Ready', now.message);
    else this.#o.recordEvent(obj, 'Warning', now.reason, now.message);
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
    const credentials = resolveCredentials(spec, (name) =>
      this.#o.source.getSecret(ref.namespace, name),
    );
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
    const rival = this.#olderRival(trigger, workflowId);
    if (rival)
      return notOk(
        type,
        Reason.PathConflict,
        `${url} is already served by WebhookTrigger ${rival}`,
      );
    return undefined;
  }

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

  /** The older trigger (if any) that claims the same URL: creation time, then namespace/name. */
  #olderRival(trigger: Trigger, workflowId: string): string | undefined {
    const mine = pathShape(routePath(workflowId, trigger.spec.pathSegment));
    const myKey = keyOf(trigger);
    const myOrder = orderKey(trigger);
    let best: { order: string; key: string } | undefined;
    for (const key of this.#byShape.get(mine) ?? []) {
      const claim = this.#claims.get(key);
      if (key === myKey || !claim?.active) continue;
      if (claim.order < myOrder && (!best || claim.order < best.order))
        best = { order: claim.order, key };
    }
    return best?.key;
  }

  #shapeOf(t: Trigger): string | undefined {
    const ns = t.metadata.namespace ?? 'default';
    const wf = this.#o.source.get({
      kind: 'Workflow',
      namespace: ns,
      name: t.spec.workflowRef.name,
    }) as WorkflowResource | undefined;
    if (!wf) return undefined;
    return pathShape(
      routePath(workflowIdentifier(ns, wf.spec.environment, wf.metadata.name), t.spec.pathSegment),
    );
  }

  // ---------------------------------------------------------------- status

  /**
   * The status to start from. On the first visit (no conditions yet) every condition
   * is written as Unknown first, so watchers see that the object is being handled.
   */
  async #initialStatus(
    ref: ObjectRef,
    obj: AnyResource,
    types: Record<string, string>,
  ): Promise<object> {
    const current = (obj.status ?? {}) as { conditions?: Condition[] };
    if (current.conditions?.length) return current;
    const generation = obj.metadata.generation ?? 1;
    const conditions = mergeConditions(
      undefined,
      Object.values(types).map((type) => ({
        type,
        status: 'Unknown' as const,
        reason: Reason.Reconciling,
        message: 'Reconciliation in progress',
      })),
      generation,
      this.#o.now(),
    );
    const status = { ...current, observedGeneration: generation, conditions };
    await this.#o.source.writeStatus(ref, status);
    return status;
  }

  async #writeStatusIfChanged(ref: ObjectRef, previous: unknown, next: object): Promise<void> {
    if (isDeepStrictEqual(stripUndefined(previous), stripUndefined(next))) return;
    await this.#o.source.writeStatus(ref, next);
  }
}

function keyOf(t: AnyResource): string {
  return `${t.metadata.namespace ?? 'default'}/${t.metadata.name}`;
}

function triggerRef(t: AnyResource): ObjectRef {
  return {
    kind: 'WebhookTrigger',
    namespace: t.metadata.namespace ?? 'default',
    name: t.metadata.name,
  };
}

/**
 * Whether the last change can only have been to status or metadata we manage: the
 * spec is the one the status was computed from, and the object is not being deleted.
 */
function isSettled(obj: AnyResource): boolean {
  if (obj.kind === 'Secret' || obj.metadata.deletionTimestamp) return false;
  const status = obj.status as { observedGeneration?: number } | undefined;
  return (
    status?.observedGeneration !== undefined &&
    status.observedGeneration === (obj.metadata.generation ?? 1)
  );
}

function orderKey(t: AnyResource): string {
  return `${t.metadata.creationTimestamp ?? ''}|${t.metadata.namespace ?? ''}/${t.metadata.name}`;
}

function stripUndefined(value: unknown): unknown {
  return value === undefined ? undefined : (JSON.parse(JSON.stringify(value)) as unknown);
}
