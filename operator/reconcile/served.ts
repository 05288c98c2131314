// Deployed, as the gateways see it: a written route counts as deployed only when every
// live gateway reports serving the trigger's current generation (the Gateway API's
// `Programmed`), and WorkflowPublished only when each of them also has the workflow,
// so Ready means a request would be served. Until then the reconcile asks to be run
// again after a while, later each time while nothing changes (recheck.ts); the
// gateways' change feed (run.ts) usually brings it back sooner.
import type { GatewayStore } from '../../api/records/gateways.ts';
import type { RouteRecord } from '../../api/records/records.ts';
import { Reason, TriggerCondition } from '../../api/v1alpha1/index.ts';
import { notOk, ok, type ConditionInput } from './conditions.ts';
import { DEFAULT_NO_GATEWAY_MS, DEFAULT_PENDING_MS, type RecheckOptions } from './recheck.ts';

export type { RecheckOptions } from './recheck.ts';

export interface Deployment {
  deployed: ConditionInput;
  /**
   * The route is not served everywhere yet: reconcile again, the first time after this
   * long (the trigger reconciler doubles it while nothing changes: recheck.ts).
   */
  recheckMs?: number;
  /** Set when some gateway serving the route does not have its workflow yet: "N of M". */
  workflowLoadedBy?: string;
}

/** The Deployed condition of a route that is written to the route store. */
export async function servedCondition(
  gateways: Pick<GatewayStore, 'served'>,
  route: RouteRecord,
  recheck: RecheckOptions = {},
): Promise<Deployment> {
  const type = TriggerCondition.Deployed;
  const served = await gateways.served(route.key);
  const what = `generation ${route.generation} of ${route.path}`;
  if (served.length === 0) {
    return {
      deployed: notOk(type, Reason.NoGateway, `No gateway is running to serve ${what}`),
      recheckMs: recheck.noGatewayMs ?? DEFAULT_NO_GATEWAY_MS,
    };
  }
  const serving = served.filter((s) => s.route?.generation === route.generation).length;
  if (serving < served.length) {
    return {
      deployed: notOk(
        type,
        Reason.GatewayPending,
        `${what} served by ${serving} of ${served.length} gateways`,
      ),
      recheckMs: recheck.pendingMs ?? DEFAULT_PENDING_MS,
    };
  }
  const methods = route.spec.methods.join(', ');
  const deployed = ok(type, Reason.Deployed, `Serving ${methods} at ${route.path}`);
  const loaded = served.filter((s) => s.route?.workflow).length;
  return loaded < served.length
    ? { deployed, workflowLoadedBy: `${loaded} of ${served.length}` }
    : { deployed };
}

/**
 * WorkflowPublished once the gateways have the workflow: a registered workflow that
 * some gateway serving the route has not loaded yet is GatewayPending, looked at again.
 */
export function publishedOnGateways(
  published: ConditionInput,
  deployment: Deployment,
  recheck: RecheckOptions = {},
): { published: ConditionInput; recheckMs?: number } {
  const { workflowLoadedBy, recheckMs } = deployment;
  if (published.status !== 'True' || !workflowLoadedBy) {
    return recheckMs ? { published, recheckMs } : { published };
  }
  return {
    published: notOk(
      TriggerCondition.WorkflowPublished,
      Reason.GatewayPending,
      `${published.message}; loaded by ${workflowLoadedBy} gateways`,
    ),
    recheckMs: Math.min(recheckMs ?? Infinity, recheck.pendingMs ?? DEFAULT_PENDING_MS),
  };
}
