// HookgateDeployment: hookgate on a Kubernetes cluster as one Pulumi component. Every
// Kubernetes object of hookgate, CRDs and the chart's Redis included, comes from the Helm
// chart (charts/hookgate) through k8s.helm.v4.Chart, so the chart stays the single
// description of the deployment and `pulumi up` installs what `helm install` does (same
// objects, security contexts, container args). Around it: the namespace, and a Secret
// for the URL of a Redis of your own so the URL never sits in Helm values. Every
// decision is in plan.ts; this file only creates what the plan says.
import * as k8s from '@pulumi/kubernetes';
import * as pulumi from '@pulumi/pulumi';
import {
  COMPONENT_TYPE,
  REDIS_URL_SECRET_KEY,
  chartPath,
  chartValues,
  labels,
  redisUrlProblem,
  resolveArgs,
  resourceNames,
  validateArgs,
  type PlanArgs,
} from './plan.ts';

/** The component's arguments; the Redis URL may be a secret Output from config. */
export type HookgateDeploymentArgs = PlanArgs<pulumi.Input<string>>;

export class HookgateDeployment extends pulumi.ComponentResource {
  /** The namespace everything namespaced lives in (known once the Namespace exists). */
  public readonly namespace: pulumi.Output<string>;
  public readonly releaseName: string;
  /** Name of the gateway's Service (port 80) in `namespace`. */
  public readonly gatewayServiceName: string;
  /** Name of the admin Service (ClusterIP 8081: read API, dashboard; port-forward to it). */
  public readonly adminServiceName: string;
  /** The public base URL webhook URLs start with. */
  public readonly baseUrl: string;
  /** Whether the chart installs the CRDs (retained on delete through their keep policy). */
  public readonly crdsInstalled: boolean;
  public readonly namespaceResource: k8s.core.v1.Namespace | undefined;
  /** The Secret holding the Redis URL, when one was given (`redis: { url }`). */
  public readonly redisUrlSecret: k8s.core.v1.Secret | undefined;
  public readonly chart: k8s.helm.v4.Chart;

  constructor(name: string, args: HookgateDeploymentArgs, opts?: pulumi.ComponentResourceOptions) {
    super(COMPONENT_TYPE, name, {}, opts);
    const errors = validateArgs(args);
    if (errors.length > 0) {
      throw new Error(`HookgateDeployment "${name}": ${errors.join('; ')}`);
    }
    const r = resolveArgs(args);
    const names = resourceNames(r.releaseName);
    this.releaseName = r.releaseName;
    this.gatewayServiceName = names.gatewayService;
    this.adminServiceName = names.adminService;
    this.baseUrl = r.baseUrl;
    this.crdsInstalled = r.crds;

    this.namespaceResource = r.createNamespace
      ? new k8s.core.v1.Namespace(
          `${name}-namespace`,
          { metadata: { name: r.namespace, labels: labels(r.releaseName, 'namespace') } },
          { parent: this },
        )
      : undefined;
    this.namespace = this.namespaceResource
      ? this.namespaceResource.metadata.name
      : pulumi.output(r.namespace);

    const redis = r.redis;
    this.redisUrlSecret =
      'url' in redis
        ? new k8s.core.v1.Secret(
            `${name}-redis-url`,
            {
              metadata: {
                name: names.redisUrlSecret,
                namespace: this.namespace,
                labels: labels(r.releaseName, 'redis'),
              },
              type: 'Opaque',
              stringData: {
                [REDIS_URL_SECRET_KEY]: pulumi.secret(checkedRedisUrl(name, redis.url)),
              },
            },
            { parent: this },
          )
        : undefined;

    const dependsOn: pulumi.Resource[] = [];
    if (this.namespaceResource) dependsOn.push(this.namespaceResource);
    if (this.redisUrlSecret) dependsOn.push(this.redisUrlSecret);
    // The chart's CRDs carry `helm.sh/resource-policy: keep`; the provider registers them
    // with retainOnDelete, so `pulumi destroy` leaves them (and every custom resource).
    this.chart = new k8s.helm.v4.Chart(
      name,
      {
        chart: chartPath(),
        name: r.releaseName,
        namespace: this.namespace,
        values: chartValues(r),
      },
      { parent: this, dependsOn },
    );

    this.registerOutputs({
      namespace: this.namespace,
      releaseName: this.releaseName,
      gatewayServiceName: this.gatewayServiceName,
      adminServiceName: this.adminServiceName,
      baseUrl: this.baseUrl,
      crdsInstalled: this.crdsInstalled,
    });
  }
}

/**
 * The Redis URL, refused once known when it is not one (a URL from config is a secret
 * Output that validateArgs cannot read; its value is known at `pulumi preview`, which
 * then stops with this error instead of deploying pods that cannot start). The message
 * does not repeat the URL: it may hold a password.
 */
function checkedRedisUrl(name: string, url: pulumi.Input<string>): pulumi.Output<string> {
  return pulumi.output(url).apply((value) => {
    const problem = redisUrlProblem(value);
    if (problem !== undefined) throw new Error(`HookgateDeployment "${name}": ${problem}`);
    return value;
  });
}
