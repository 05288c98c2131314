// The workers scaled on the execution queue, as the component's `workerAutoscaling`
// argument: the chart's `worker.autoscaling.*` values (a KEDA ScaledObject with the
// Prometheus scaler; docs/scaling.md, ADR 0023). Plain data, checked before anything
// is created. Absent: no autoscaling (the chart default).

export interface WorkerAutoscalingArgs {
  /** Fewest workers (default 1); 0 lets KEDA stop them all while the queue is empty. */
  minReplicas?: number;
  /** Most workers (default 10). */
  maxReplicas?: number;
  /** Jobs waiting or running per worker to aim at (default: the worker concurrency). */
  jobsPerReplica?: number;
  /** Also scale while the oldest job is older than this, in seconds (default 0: off). */
  oldestAgeSeconds?: number;
  /** The Prometheus KEDA queries; default the analytics Prometheus URL. */
  prometheusUrl?: string;
  /** Label matchers of the queries; default the release's namespace and metrics Service. */
  selector?: string;
  /** A KEDA TriggerAuthentication for Prometheus. */
  authenticationRef?: string;
}

export interface ChartWorkerAutoscaling {
  enabled: true;
  minReplicas: number;
  maxReplicas: number;
  jobsPerReplica: number;
  oldestAgeSeconds: number;
  prometheus: { serverAddress: string; selector: string; authenticationRef: string };
}

const NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * Every problem with the argument (empty when valid); `analyticsUrl` is the analytics
 * Prometheus URL, which KEDA queries when the argument names none.
 */
export function validateWorkerAutoscaling(
  a: WorkerAutoscalingArgs,
  analyticsUrl: string | undefined,
): string[] {
  const errors: string[] = [];
  const wholes: [keyof WorkerAutoscalingArgs, number | undefined, number][] = [
    ['minReplicas', a.minReplicas, 0],
    ['maxReplicas', a.maxReplicas, 1],
    ['jobsPerReplica', a.jobsPerReplica, 0],
    ['oldestAgeSeconds', a.oldestAgeSeconds, 0],
  ];
  for (const [key, n, min] of wholes) {
    if (n !== undefined && !(Number.isInteger(n) && n >= min))
      errors.push(`workerAutoscaling.${key} must be a whole number >= ${min}, got ${n}`);
  }
  if ((a.minReplicas ?? 1) > (a.maxReplicas ?? 10))
    errors.push('workerAutoscaling.minReplicas must not exceed workerAutoscaling.maxReplicas');
  if (a.prometheusUrl !== undefined && !/^https?:\/\/\S+$/.test(a.prometheusUrl))
    errors.push(`workerAutoscaling.prometheusUrl "${a.prometheusUrl}" must be an http(s) URL`);
  if (!a.prometheusUrl && !analyticsUrl)
    errors.push(
      'workerAutoscaling needs a Prometheus: workerAutoscaling.prometheusUrl or analytics.prometheus.url',
    );
  if (a.authenticationRef !== undefined && !NAME.test(a.authenticationRef))
    errors.push(`workerAutoscaling.authenticationRef "${a.authenticationRef}" is not a name`);
  return errors;
}

/** The chart's worker.autoscaling values, the chart's defaults filled in. */
export function workerAutoscalingValues(a: WorkerAutoscalingArgs): ChartWorkerAutoscaling {
  return {
    enabled: true,
    minReplicas: a.minReplicas ?? 1,
    maxReplicas: a.maxReplicas ?? 10,
    jobsPerReplica: a.jobsPerReplica ?? 0,
    oldestAgeSeconds: a.oldestAgeSeconds ?? 0,
    prometheus: {
      serverAddress: a.prometheusUrl ?? '',
      selector: a.selector ?? '',
      authenticationRef: a.authenticationRef ?? '',
    },
  };
}
