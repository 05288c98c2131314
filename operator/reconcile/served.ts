// Deployed, as the gateways see it: a written route counts as deployed only when every
// live gateway reports serving the trigger's current generation (the Gateway API's
// `Programmed`), and WorkflowPublished only when each of them also has the workflow,
// so Ready means a request would be served. Until then the reconcile asks to be run
// again after a while; the gateways' change feed (run.ts) usually brings it back sooner.
import type { GatewayStore } from '../../api/records/gateways.ts';
import type { RouteRecord } from '../../api/records/records.ts';
import { Reason, TriggerCondition } from '../../api/v1alpha1/index.ts';
import { notOk, ok, type ConditionInput } from './conditions.ts';

/** How soon a route that is not served everywhere is looked at again. */
export interface RecheckOptions {
  /** Some gateway does not serve the current generation yet. Default 5 s. */
  pendingMs?: number;
  /** No gateway is running. Default 30 s (a gateway that starts is announced anyway). */
  noGatewayMs?: number;
}

export interface Deployment {
  deployed: ConditionInput;
  /** Reconcile again after this long (the route is not served everywhere yet). */
  requeueAfterMs?: number;
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
      requeueAfterMs: recheck.noGatewayMs ?? 30_000,
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
      requeueAfterMs: recheck.pendingMs ?? 5_000,
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
): { published: ConditionInput; requeueAfterMs?: number } {
  const { workflowLoadedBy, requeueAfterMs } = deployment;
  if (published.status !== 'True' || !workflowLoadedBy) {
    return requeueAfterMs ? { published, requeueAfterMs } : { published };
  }
  return {
    published: notOk(
      TriggerCondition.WorkflowPublished,
      Reason.GatewayPending,
      `${published.message}; loaded by ${workflowLoadedBy} gateways`,
    ),
    requeueAfterMs: Math.min(requeueAfterMs ?? Infinity, recheck.pendingMs ?? 5_000),
  };
}
