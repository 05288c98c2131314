// Typed views of the cached objects the reconcilers read, and the lookups they share.
import type {
  WebhookTriggerSpec,
  WebhookTriggerStatus,
  WorkflowSpec,
  WorkflowStatus,
} from '../../api/v1alpha1/index.ts';
import type { AnyResource, ObjectRef, ResourceSource } from '../sources/ports.ts';

export type Trigger = AnyResource & { spec: WebhookTriggerSpec; status?: WebhookTriggerStatus };
export type WorkflowResource = AnyResource & { spec: WorkflowSpec; status?: WorkflowStatus };

/** `<namespace>/<name>`: the key of a trigger's route and of its path claim. */
export function keyOf(obj: AnyResource): string {
  return `${obj.metadata.namespace ?? 'default'}/${obj.metadata.name}`;
}

export function triggerRef(t: AnyResource): ObjectRef {
  return {
    kind: 'WebhookTrigger',
    namespace: t.metadata.namespace ?? 'default',
    name: t.metadata.name,
  };
}

/** The triggers that start `workflow` (same namespace, `spec.workflowRef` naming it). */
export function triggersOf(source: ResourceSource, workflow: ObjectRef): Trigger[] {
  return (source.list('WebhookTrigger') as Trigger[]).filter(
    (t) => t.metadata.namespace === workflow.namespace && t.spec.workflowRef.name === workflow.name,
  );
}

/** The Workflow a trigger refers to, from the cache. */
export function workflowOf(
  source: Pick<ResourceSource, 'get'>,
  namespace: string,
  t: Trigger,
): WorkflowResource | undefined {
  return source.get({ kind: 'Workflow', namespace, name: t.spec.workflowRef.name }) as
    WorkflowResource | undefined;
}
