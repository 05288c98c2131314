// HookgateDeployment: hookgate on a Kubernetes cluster as one Pulumi component. The
// workloads come from the Helm chart (charts/hookgate) through k8s.helm.v4.Chart, so the
// chart stays the single description of the deployment; the CRDs are separate children
// retained on delete, and a Redis URL goes into a Secret the component owns. Every
// decision is in plan.ts; this file only creates what the plan says.
import * as k8s from '@pulumi/kubernetes';
import * as pulumi from '@pulumi/pulumi';
import {
  COMPONENT_TYPE,
  REDIS_SECRET_KEY,
  chartPath,
  chartValues,
  labels,
  loadCrds,
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
  /** The public base URL webhook URLs start with. */
  public readonly baseUrl: string;
  /** Names of the CRDs this component owns (empty with `crds: false`). */
  public readonly crdNames: string[];
  public readonly namespaceResource: k8s.core.v1.Namespace | undefined;
  public readonly crds: k8s.apiextensions.v1.CustomResourceDefinition[];
  public readonly redisSecret: k8s.core.v1.Secret | undefined;
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
    this.baseUrl = r.baseUrl;

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

    // Deleting a CRD deletes every Workflow and WebhookTrigger with it: Pulumi keeps them
    // in the cluster when the stack drops them, as `helm.sh/resource-policy: keep` does
    // for the chart's own copies.
    const crdManifests = r.crds ? loadCrds() : [];
    this.crdNames = crdManifests.map((crd) => crd.metadata.name);
    this.crds = crdManifests.map(
      (crd) =>
        new k8s.apiextensions.v1.CustomResourceDefinition(
          `${name}-${crd.metadata.name}`,
          {
            metadata: { name: crd.metadata.name, labels: labels(r.releaseName, 'crd') },
            // The generator's output is the API server's own schema; parseCrd checked its shape.
            spec: crd.spec as unknown as k8s.types.input.apiextensions.v1.CustomResourceDefinitionSpec,
          },
          { parent: this, retainOnDelete: true },
        ),
    );

    const redis = r.redis;
    this.redisSecret =
      'url' in redis
        ? new k8s.core.v1.Secret(
            `${name}-redis`,
            {
              metadata: {
                name: names.redisSecret,
                namespace: this.namespace,
                labels: labels(r.releaseName, 'redis'),
              },
              type: 'Opaque',
              stringData: { [REDIS_SECRET_KEY]: pulumi.secret(redis.url) },
            },
            { parent: this },
          )
        : undefined;

    const dependsOn: pulumi.Resource[] = [...this.crds];
    if (this.namespaceResource) dependsOn.push(this.namespaceResource);
    if (this.redisSecret) dependsOn.push(this.redisSecret);
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
      baseUrl: this.baseUrl,
      crdNames: this.crdNames,
    });
  }
}
