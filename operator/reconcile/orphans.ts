// The sweep of orphaned records: routes and workflow registrations whose object is
// gone. The finalizer removes them on every delete the operator sees; one it does not
// see leaves them behind for good (the finalizer stripped while the operator was down,
// `kubectl delete --force` with the finalizer patched away, a manifest taken out of a
// folder while `hookgate dev` was not running against shared Redis). The gateways go on
// serving such a route, and one whose path a live trigger wants keeps that trigger from
// ever being served alone (GatewayPending).
//
// Run once per leadership, after the initial sync (run.ts), beside the reconciles:
//
// - Only records of the namespaces the source watches are looked at: a namespaced
//   operator never deletes what another operator, watching another namespace of the
//   same Redis, wrote.
// - A record is a candidate when the cache holds no object for it. The cache may lag
//   behind a record that another writer (the previous leader, a newer operator during
//   a rolling upgrade) wrote for an object created after our initial list; the records
//   carry no write time or resourceVersion to compare with that list. So candidates
//   are checked against a fresh list (the API server, not the cache), read after the
//   records were: a record's writer saw its object before writing it, so before that
//   list; an object that list does not hold was deleted for good (an object being
//   deleted is still listed, and its finalizer cleanup removes the record).
// - Right before each delete the cache is asked again; after it, an object the cache
//   holds by then (created meanwhile, of the same name) is reconciled, which writes
//   its record back.
// - Only the leader deletes, and a leader can lose the Lease mid-sweep (taken over
//   after a freeze, or while its renewals failed) some time before it notices and
//   exits: before each delete the Lease is read again (`leadership.confirm`), and a
//   sweep that no longer holds it stops there, deleting nothing more. One that cannot
//   tell (the API server unreachable), or whose Lease still names it but is past its
//   lease duration (renewals failing: LeaseExpiredError), fails and is retried. A replica that freezes
//   between that read and the delete still makes the delete, but only of the record it
//   judged: each delete is conditional on the record being the one read (`deleteIf`,
//   a compare-and-delete in one Redis script, as a Kubernetes delete precondition), so
//   a record put again meanwhile (the new leader's, for an object created again under
//   the name) is kept, and logged.
// - A candidate route whose uid its source could not have given (a folder's objects
//   have derived uids, a cluster's random ones: `mayHaveWritten`) means `hookgate dev`
//   and a cluster's operator share the store: nothing is deleted, and that is logged.
// - Each deletion is logged; nothing is said about records whose object exists.
import { parseWorkflowIdentifier } from '../../api/identity.ts';
import { LeadershipLostError, type Leadership } from '../controller/leader-election.ts';
import type { RouteStore, WorkflowRegistry } from '../../api/records/records.ts';
import { watches, type ObjectRef, type ResourceSource } from '../sources/ports.ts';

export interface OrphanSweepOptions {
  source: ResourceSource;
  routes: RouteStore;
  workflows: WorkflowRegistry;
  /** Reconcile an object (one that appeared while its record was being deleted). */
  enqueue: (ref: ObjectRef) => void;
  log: (msg: string, fields?: object) => void;
  /** True once the loop is stopping: delete nothing more. */
  stopped: () => boolean;
  /** Confirmed right before each delete; omitted: one process, no leader election. */
  leadership?: Leadership;
}

/** What one sweep deleted: route keys and workflow identifiers. */
export interface SweepResult {
  routes: string[];
  workflows: string[];
  /** Set when nothing was deleted because another kind of writer shares the store. */
  refused?: true;
  /** Set when the sweep stopped because this replica no longer holds the Lease. */
  leadershipLost?: true;
}

interface Candidate {
  /** The record's key in its store. */
  key: string;
  /** The object it was written for. */
  ref: ObjectRef;
  /** The uid a route was written with (registrations carry none). */
  uid?: string;
  /** Said in the log line. */
  detail: Record<string, string>;
  /** Delete the record as it was read: false when it is gone or was put again since. */
  remove: () => Promise<boolean>;
}

/** A registration whose workflowId is the identifier of the namespace and name it carries. */
function namesItself(w: { workflowId: string; namespace: string; name: string }): boolean {
  const id = parseWorkflowIdentifier(w.workflowId);
  return id !== undefined && id.namespace === w.namespace && id.name === w.name;
}

const refKeyOf = (ref: ObjectRef) => `${ref.kind}/${ref.namespace}/${ref.name}`;

export async function sweepOrphans(o: OrphanSweepOptions): Promise<SweepResult> {
  const { source } = o;
  const mine = (namespace: string) => watches(source.namespaces, namespace);
  const missing = (ref: ObjectRef) => source.get(ref) === undefined;
  // Only records whose key is what this operator writes for the object they name: one
  // of another shape (written by another version, say) is not judged by its fields.
  const routes: Candidate[] = (await o.routes.list())
    .filter((r) => r.key === `${r.namespace}/${r.name}` && mine(r.namespace))
    .map((r) => ({
      key: r.key,
      ref: { kind: 'WebhookTrigger' as const, namespace: r.namespace, name: r.name },
      uid: r.uid,
      detail: { route: r.key, path: r.path, uid: r.uid },
      remove: () => o.routes.deleteIf(r.key, r),
    }))
    .filter((c) => missing(c.ref));
  const workflows: Candidate[] = (await o.workflows.list())
    .filter((w) => namesItself(w) && mine(w.namespace))
    .map((w) => ({
      key: w.workflowId,
      ref: { kind: 'Workflow' as const, namespace: w.namespace, name: w.name },
      detail: { workflowId: w.workflowId, workflow: `${w.namespace}/${w.name}` },
      remove: () => o.workflows.deleteIf(w.workflowId, w),
    }))
    .filter((c) => missing(c.ref));

  const result: SweepResult = { routes: [], workflows: [] };
  // A candidate route written for another kind of source (a folder's uid in a
  // cluster's store, a cluster's in a folder's): two kinds of writer share this store,
  // and neither's objects tell what the other's records are. Registrations carry no
  // uid to sort them by, so nothing at all is deleted.
  const foreign = routes.filter((c) => !source.mayHaveWritten(c.ref, c.uid ?? ''));
  if (foreign.length > 0) {
    o.log(
      'Not sweeping orphaned routes and registrations: the store holds routes written for ' +
        'another kind of source (hookgate dev and a cluster operator sharing one Redis?); ' +
        'give each its own Redis',
      { foreignRoutes: foreign.length, example: foreign[0]?.detail },
    );
    return { ...result, refused: true };
  }
  for (const [kind, candidates, deleted, what] of [
    ['WebhookTrigger', routes, result.routes, 'route'],
    ['Workflow', workflows, result.workflows, 'workflow registration'],
  ] as const) {
    if (candidates.length === 0) continue;
    const existing = new Set((await source.listFresh(kind)).map(refKeyOf));
    for (const c of candidates) {
      if (o.stopped()) return result;
      if (existing.has(refKeyOf(c.ref)) || !missing(c.ref)) continue;
      if (o.leadership) {
        const lost = await leadershipLost(o.leadership);
        if (lost) {
          o.log(
            'Stopped sweeping orphaned routes and registrations: this replica no longer leads',
            {
              reason: lost,
              deletedRoutes: result.routes.length,
              deletedWorkflows: result.workflows.length,
            },
          );
          return { ...result, leadershipLost: true };
        }
        // The read took a round trip: ask the cache again right before the delete.
        if (o.stopped()) return result;
        if (!missing(c.ref)) continue;
      }
      if (!(await c.remove())) {
        // Put again since the sweep read it (the new leader's, after a takeover while
        // this replica was frozen; a reconcile of an object created again): not the
        // record judged orphaned. Its writer answers for it.
        o.log(
          `Kept a ${what} written again since the sweep read it: ${kind} ${c.ref.namespace}/${c.ref.name}`,
          c.detail,
        );
        continue;
      }
      deleted.push(c.key);
      o.log(`Deleted an orphaned ${what}: no ${kind} ${c.ref.namespace}/${c.ref.name}`, c.detail);
      if (!missing(c.ref)) o.enqueue(c.ref);
    }
  }
  return result;
}

/** Why this replica no longer leads, or undefined while it does; throws when it cannot tell. */
async function leadershipLost(leadership: Leadership): Promise<string | undefined> {
  try {
    await leadership.confirm();
    return undefined;
  } catch (err) {
    if (err instanceof LeadershipLostError) return err.message;
    throw err;
  }
}
