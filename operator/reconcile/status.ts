// Status as the reconcilers write it: every condition Unknown on the first visit, then
// one write per reconcile, only when something changed, and one Event when the Ready
// condition changes.
import { Reason, type Condition } from '../../api/v1alpha1/index.ts';
import { jsonEqual } from '../controller/json-equal.ts';
import type { AnyResource, ObjectRef, ResourceSource } from '../sources/ports.ts';
import { mergeConditions } from './conditions.ts';

/** Records a Kubernetes Event about `obj`. */
export type RecordEvent = (
  obj: AnyResource,
  type: 'Normal' | 'Warning',
  reason: string,
  message: string,
) => void;

export interface StatusWriterOptions {
  source: Pick<ResourceSource, 'writeStatus'>;
  now: () => Date;
  recordEvent: RecordEvent;
}

export class StatusWriter {
  readonly #o: StatusWriterOptions;

  constructor(options: StatusWriterOptions) {
    this.#o = options;
  }

  /**
   * The status to start from. On the first visit (no conditions yet) every condition
   * in `types` is written as Unknown first, so watchers see that the object is being
   * handled.
   */
  async initial<S extends object>(
    ref: ObjectRef,
    obj: AnyResource,
    types: Record<string, string>,
  ): Promise<S> {
    const current = (obj.status ?? {}) as { conditions?: Condition[] };
    if (current.conditions?.length) return current as S;
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
    await this.#o.source.writeStatus(ref, status, obj.metadata.uid);
    return status as S;
  }

  /**
   * Write `next` unless it equals `previous`, then announce a change of Ready.
   * `obj` is the object as read at the start of the reconcile.
   */
  async write(
    ref: ObjectRef,
    obj: AnyResource,
    previous: { conditions?: Condition[] },
    next: { conditions?: Condition[] },
  ): Promise<void> {
    if (!jsonEqual(previous, next)) {
      await this.#o.source.writeStatus(ref, next, obj.metadata.uid);
    }
    this.#announce(obj, previous.conditions, next.conditions);
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
}
