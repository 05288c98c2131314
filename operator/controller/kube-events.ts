// Kubernetes Events for the reconciler: what changed an object's Ready condition, and
// cleanup on deletion, posted through the (deduplicating, rate-limited) EventRecorder.
import { EventRecorder } from './events.ts';
import type { KubeClient } from './kube-client.ts';
import type { ReconcilerOptions } from '../reconcile/reconciler.ts';

export function kubernetesEvents(
  client: KubeClient,
  component: string,
): NonNullable<ReconcilerOptions['recordEvent']> {
  const recorder = new EventRecorder({
    client,
    component,
    ...(process.env.POD_NAME ? { instance: process.env.POD_NAME } : {}),
  });
  return (obj, type, reason, message) =>
    recorder.event(
      {
        apiVersion: obj.apiVersion,
        kind: obj.kind,
        metadata: {
          name: obj.metadata.name,
          ...(obj.metadata.namespace ? { namespace: obj.metadata.namespace } : {}),
          ...(obj.metadata.uid ? { uid: obj.metadata.uid } : {}),
        },
      },
      type,
      reason,
      message,
    );
}
