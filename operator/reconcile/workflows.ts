// The Workflow controller: registers a valid, published Workflow with the engine
// (the Publish action) and reports Valid, Published and Ready. When a registration
// changes, the Workflow's triggers are asked to look again (the registry is not a
// watched resource). A registry that fails leaves Published=False/StoreError behind,
// and the error is returned so the reconcile is retried with backoff. A registry that
// holds a registration of a later generation of the Workflow keeps it, and no status
// is written from this older look (SupersededRecordError, ADR 0051).
import { isDeepStrictEqual } from 'node:util';
import { Reason, WorkflowCondition, type WorkflowStatus } from '../../api/v1alpha1/index.ts';
import {
  SupersededRecordError,
  type WorkflowRegistration,
  type WorkflowRegistry,
  type WrittenFor,
} from '../../api/records/records.ts';
import { workflowIdentifier } from '../../api/identity.ts';
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
import { triggerRef, triggersOf, type WorkflowResource } from './resources.ts';
import type { RecordEvent, StatusWriter } from './status.ts';
import { cleanupFailed } from './store-errors.ts';
import { checkWorkflow, workflowWarnings } from '../../api/workflow-check.ts';

export interface WorkflowReconcilerOptions {
  source: ResourceSource;
  workflows: WorkflowRegistry;
  status: StatusWriter;
  now: () => Date;
  /** Ask for an object (here: a trigger) to be reconciled later. */
  enqueue: (ref: ObjectRef) => void;
  recordEvent: RecordEvent;
}

export class WorkflowReconciler {
  readonly #o: WorkflowReconcilerOptions;

  constructor(options: WorkflowReconcilerOptions) {
    this.#o = options;
  }

  async reconcile(ref: ObjectRef): Promise<void> {
    const { source } = this.#o;
    const wf = source.get(ref) as WorkflowResource | undefined;
    if (!wf || wf.metadata.deletionTimestamp) return this.#cleanUp(ref, wf);
    const generation = wf.metadata.generation ?? 1;
    const previous = await this.#o.status.initial<WorkflowStatus>(ref, wf, WorkflowCondition);
    if (!(await source.addFinalizer(ref, wf.metadata.uid))) {
      // Gone or being deleted since the cache said otherwise: nothing may be published
      // for it (O6). Its registrations go, as on a delete; the event of the deletion
      // brings the rest (the Event, our finalizer if it is there).
      return this.#cleanUp(ref, undefined);
    }

    const workflowId = workflowIdentifier(ref.namespace, wf.spec.environment, ref.name);
    const problems = checkWorkflow(wf.spec);
    const warnings = workflowWarnings(wf.spec);
    const valid =
      problems.length === 0
        ? ok(
            WorkflowCondition.Valid,
            Reason.Succeeded,
            warnings.length === 0
              ? 'All nodes and expressions are valid'
              : `All nodes and expressions are valid; ${problemsMessage(warnings)}`,
          )
        : notOk(WorkflowCondition.Valid, Reason.InvalidSpec, problemsMessage(problems));

    let failure: Error | undefined;
    const published = await this.#publish(ref, wf, workflowId, generation, valid)
      .then(async (condition) => {
        const keep = condition.status === 'True' ? workflowId : undefined;
        await this.#unregister(ref.namespace, ref.name, keep, {
          uid: wf.metadata.uid ?? '',
          generation,
        });
        return condition;
      })
      .catch((err: unknown) => {
        failure = err instanceof Error ? err : new Error(String(err));
        return storeError(WorkflowCondition.Published, 'Cannot write the workflow registry', err);
      });

    // The registry holds a registration of a later generation of this Workflow (a newer
    // look at it: the new leader's, written while this replica has not noticed it lost
    // the Lease, or this cache is behind): the status computed here is of the older
    // look too, and is not written. The reconcile fails and runs again.
    if (failure instanceof SupersededRecordError) throw failure;
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
    await this.#o.status.write(ref, wf, previous, status);
    if (failure !== undefined) throw failure;
  }

  /** The workflow is gone or being deleted: remove its registrations, then its finalizer. */
  async #cleanUp(ref: ObjectRef, wf: WorkflowResource | undefined): Promise<void> {
    try {
      await this.#unregister(ref.namespace, ref.name, undefined);
    } catch (err) {
      if (!wf) throw err;
      const what = 'Cannot remove the registration';
      return cleanupFailed(this.#o.status, ref, wf, what, err, this.#o.now());
    }
    if (wf) {
      this.#o.recordEvent(wf, 'Normal', 'CleanedUp', 'Unregistered from the workflow engine');
      await this.#o.source.removeFinalizer(ref, wf.metadata.uid);
    }
  }

  /** Published: register the workflow with the engine when it is valid and meant to run. */
  async #publish(
    ref: ObjectRef,
    wf: WorkflowResource,
    workflowId: string,
    generation: number,
    valid: ConditionInput,
  ): Promise<ConditionInput> {
    const type = WorkflowCondition.Published;
    if (valid.status !== 'True') {
      return notOk(type, Reason.InvalidSpec, 'Not published: the workflow is invalid');
    }
    if (!wf.spec.publish) return notOk(type, Reason.PublishDisabled, 'spec.publish is false');
    const registration: WorkflowRegistration = {
      workflowId,
      namespace: ref.namespace,
      name: ref.name,
      ...(wf.metadata.uid ? { uid: wf.metadata.uid } : {}),
      generation,
      application: wf.spec.application,
      environment: wf.spec.environment,
      spec: wf.spec,
    };
    const existing = await this.#o.workflows.get(workflowId);
    if (existing && (existing.namespace !== ref.namespace || existing.name !== ref.name)) {
      // Slugging can map two names to one identifier; the first one keeps it.
      return notOk(
        type,
        Reason.PathConflict,
        `workflow identifier ${workflowId} is already used by ${existing.namespace}/${existing.name}`,
      );
    }
    if (!isDeepStrictEqual(existing, registration)) {
      if (!(await this.#o.workflows.putUnlessSuperseded(workflowId, registration))) {
        throw new SupersededRecordError('The registration', workflowId, registration);
      }
      this.#enqueueTriggersOf(ref);
    }
    return ok(type, Reason.Published, `Published as ${workflowId}`);
  }

  /**
   * Remove this workflow's registrations except the one it should keep. With `writer`
   * (the Workflow as this reconcile read it), not one of a later generation of it (under
   * the identifier of an environment it moved to since): SupersededRecordError. Without
   * (the Workflow is being deleted, or gone), every one.
   */
  async #unregister(
    namespace: string,
    name: string,
    keep: string | undefined,
    writer?: WrittenFor,
  ): Promise<void> {
    const { workflows } = this.#o;
    for (const reg of await workflows.list()) {
      if (reg.namespace === namespace && reg.name === name && reg.workflowId !== keep) {
        if (!writer) await workflows.delete(reg.workflowId);
        else if (!(await workflows.deleteUnlessSuperseded(reg.workflowId, writer))) {
          throw new SupersededRecordError('The registration', reg.workflowId, writer);
        }
        this.#enqueueTriggersOf({ kind: 'Workflow', namespace, name });
      }
    }
  }

  /** The workflow's registration changed: its triggers must look again. */
  #enqueueTriggersOf(workflow: ObjectRef): void {
    for (const t of triggersOf(this.#o.source, workflow)) this.#o.enqueue(triggerRef(t));
  }
}
