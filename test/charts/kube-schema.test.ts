// Every object the chart renders, with its defaults and with each documented option,
// validated against the Kubernetes 1.36 API (types, required fields, enums, unknown
// fields, names; see ./kube-schema.ts), and the ServiceMonitor against the
// prometheus-operator fields it uses. The check itself is shown to catch what it must.
import { describe, expect, it } from 'vitest';
import {
  ALL_OPT_INS,
  EXTERNAL_REDIS_SECRET,
  deployment,
  redisStatefulSet,
  render,
  tools,
  type K8sObject,
} from './chart.ts';
import { KUBERNETES_VERSION, validateObject } from './kube-schema.ts';

/** The documented options, each on (README "Values"), and everything on at once. */
const OPTIONS: Record<string, string[]> = {
  defaults: [],
  'every opt-in': ALL_OPT_INS,
  ingress: ['ingress.enabled=true', 'ingress.host=hooks.example.com', 'ingress.className=nginx'],
  'ingress with TLS': [
    'ingress.enabled=true',
    'ingress.host=hooks.example.com',
    'ingress.tls.enabled=true',
    'ingress.annotations.cert-manager\\.io/cluster-issuer=letsencrypt',
  ],
  networkPolicy: [
    'networkPolicy.enabled=true',
    'networkPolicy.gatewayFrom[0].namespaceSelector.matchLabels.name=ingress',
    'networkPolicy.metricsFrom[0].podSelector.matchExpressions[0].key=app',
    'networkPolicy.metricsFrom[0].podSelector.matchExpressions[0].operator=In',
    'networkPolicy.metricsFrom[0].podSelector.matchExpressions[0].values[0]=prometheus',
    'networkPolicy.metricsFrom[1].ipBlock.cidr=10.0.0.0/8',
  ],
  'egress NetworkPolicies': [
    'networkPolicy.enabled=true',
    'networkPolicy.egress.enabled=true',
    'networkPolicy.egress.apiServer.cidrs={172.18.0.2/32,fd00:10::1/128}',
  ],
  'egress with externalRedis, Prometheus, outbound rules, inline executions': [
    'networkPolicy.enabled=true',
    'networkPolicy.egress.enabled=true',
    'networkPolicy.egress.apiServer.cidrs={10.0.0.1/32}',
    'networkPolicy.egress.apiServer.ports={6443}',
    ...EXTERNAL_REDIS_SECRET,
    'networkPolicy.egress.externalRedis.to[0].ipBlock.cidr=10.1.2.0/28',
    'networkPolicy.egress.externalRedis.to[0].ipBlock.except={10.1.2.15/32}',
    'analytics.prometheus.url=http://prometheus-operated.monitoring.svc:9090',
    'networkPolicy.egress.prometheus.to[0].namespaceSelector.matchLabels.name=monitoring',
    'networkPolicy.egress.prometheus.to[0].podSelector.matchLabels.app=prometheus',
    'networkPolicy.egress.dns.to[0].ipBlock.cidr=169.254.20.10/32',
    'networkPolicy.egress.internet.ports={443}',
    'networkPolicy.egress.outboundRules[0].to[0].namespaceSelector.matchLabels.team=billing',
    'networkPolicy.egress.outboundRules[0].ports[0].port=8443',
    'networkPolicy.egress.outboundRules[0].ports[0].protocol=TCP',
    'networkPolicy.egress.outboundRules[0].ports[1].port=9000',
    'networkPolicy.egress.outboundRules[0].ports[1].endPort=9100',
    'gateway.executions=inline',
  ],
  'admin token': ['admin.auth=token', 'admin.tokenSecret.name=admin-token'],
  'byte budgets': [
    'config.budgets.executionStoreBytes=1Gi',
    'config.budgets.storedBodyBytes=131072',
    'config.budgets.executionTtlMs=3600000',
    'config.budgets.idempotencyBytes=64Mi',
    'config.budgets.streamBufferBytes=2Mi',
    'config.budgets.listPageBytes=8Mi',
  ],
  'admin none': ['admin.auth=none', 'networkPolicy.enabled=true'],
  serviceMonitor: [
    'metrics.serviceMonitor.enabled=true',
    'metrics.serviceMonitor.labels.release=prom',
    'metrics.serviceMonitor.interval=15s',
  ],
  podDisruptionBudgets: [
    'podDisruptionBudget.enabled=true',
    'podDisruptionBudget.maxUnavailable=50%',
  ],
  'externalRedis from a Secret': EXTERNAL_REDIS_SECRET,
  'externalRedis URL': ['redis.enabled=false', 'externalRedis.url=rediss://r.example:6380'],
  'externalRedis with every opt-in': [...ALL_OPT_INS, ...EXTERNAL_REDIS_SECRET],
  'Redis storage and password Secret': [
    'redis.persistence.size=20Gi',
    'redis.persistence.storageClass=fast-ssd',
    'redis.auth.existingSecret=redis-auth',
    'redis.maxmemory=512mb',
  ],
  'worker autoscaling (KEDA)': [
    'worker.autoscaling.enabled=true',
    'worker.autoscaling.prometheus.serverAddress=http://prometheus-operated.monitoring.svc:9090',
    'worker.autoscaling.prometheus.authenticationRef=prom-auth',
    'worker.autoscaling.oldestAgeSeconds=120',
    'worker.autoscaling.minReplicas=0',
  ],
  'inline executions': ['gateway.executions=inline', 'podDisruptionBudget.enabled=true'],
  'analytics from Prometheus': [
    'analytics.prometheus.url=https://prometheus.monitoring.svc:9090',
    'analytics.prometheus.existingSecret=prom-token',
    'analytics.prometheus.caConfigMap=prom-ca',
  ],
  'scheduling and pull secrets': [
    'imagePullSecrets[0].name=regcred',
    'gateway.nodeSelector.pool=edge',
    'worker.tolerations[0].key=dedicated',
    'worker.tolerations[0].operator=Equal',
    'worker.tolerations[0].value=hookgate',
    'worker.tolerations[0].effect=NoSchedule',
    'redis.tolerations[0].key=storage',
    'redis.tolerations[0].operator=Exists',
    'operator.podAnnotations.team=platform',
    'serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::1:role/hookgate',
  ],
  'no RBAC, no CRDs, one operator': [
    'rbac.create=false',
    'serviceAccount.create=false',
    'serviceAccount.name=hooks-operator',
    'serviceAccount.gateway.name=hooks-gateway',
    'serviceAccount.worker.name=hooks-plain',
    'serviceAccount.redis.name=hooks-plain',
    'crds.enabled=false',
    'operator.replicas=1',
    'operator.leaderElection.enabled=false',
  ],
  'extra env and digests': [
    'gateway.extraEnv[0].name=NODE_OPTIONS',
    'gateway.extraEnv[0].value=--max-old-space-size=384',
    'worker.extraEnv[0].name=HTTPS_PROXY',
    'worker.extraEnv[0].valueFrom.secretKeyRef.name=proxy',
    'worker.extraEnv[0].valueFrom.secretKeyRef.key=url',
    'operator.extraEnv[0].name=MEMORY_LIMIT',
    'operator.extraEnv[0].valueFrom.resourceFieldRef.resource=limits.memory',
    `image.digest=sha256:${'0'.repeat(64)}`,
    `redis.image.digest=sha256:${'1'.repeat(64)}`,
  ],
  'service and ports': [
    'gateway.service.type=LoadBalancer',
    'gateway.service.port=8443',
    'metrics.port=9464',
    'tmpDir.sizeLimit=128Mi',
  ],
};

function problems(objects: K8sObject[]): string[] {
  return objects.flatMap((o) => validateObject(o));
}

describe.skipIf(!tools)(`rendered objects against the Kubernetes ${KUBERNETES_VERSION} API`, () => {
  for (const [name, sets] of Object.entries(OPTIONS)) {
    it(`validates every object: ${name}`, async () => {
      const objects = await render(...sets);
      expect(objects.length).toBeGreaterThan(0);
      expect(problems(objects)).toEqual([]);
    });
  }

  it('covers every kind the chart renders, the ServiceMonitor included', async () => {
    const kinds = new Set((await render(...ALL_OPT_INS)).map((o) => `${o.apiVersion} ${o.kind}`));
    expect([...kinds].sort()).toEqual([
      'apiextensions.k8s.io/v1 CustomResourceDefinition',
      'apps/v1 Deployment',
      'apps/v1 StatefulSet',
      'monitoring.coreos.com/v1 ServiceMonitor',
      'networking.k8s.io/v1 Ingress',
      'networking.k8s.io/v1 NetworkPolicy',
      'policy/v1 PodDisruptionBudget',
      'rbac.authorization.k8s.io/v1 ClusterRole',
      'rbac.authorization.k8s.io/v1 ClusterRoleBinding',
      'rbac.authorization.k8s.io/v1 Role',
      'rbac.authorization.k8s.io/v1 RoleBinding',
      'v1 ConfigMap',
      'v1 Secret',
      'v1 Service',
      'v1 ServiceAccount',
    ]);
  });

  it('catches a wrong type, a wrong enum value, an unknown field and a bad name', async () => {
    const objects = await render(...ALL_OPT_INS);
    const broken: K8sObject[] = structuredClone(objects);
    const gateway = deployment(broken, 'gateway');
    const c = gateway.spec.template.spec.containers[0];
    if (!c) throw new Error('no gateway container');
    (c.ports[0] as { containerPort: unknown }).containerPort = '8080';
    (c.securityContext as unknown as Record<string, unknown>)['seccompProfle'] = {
      type: 'RuntimeDefault',
    };
    const sts = redisStatefulSet(broken);
    sts.spec.volumeClaimTemplates[0]?.spec.accessModes.push('ReadWriteSometimes');
    sts.metadata.name = 'Redis_Primary';
    const monitor = broken.find((o) => o.kind === 'ServiceMonitor');
    if (!monitor) throw new Error('no ServiceMonitor');
    (monitor['spec'] as { endpoints: Record<string, unknown>[] }).endpoints[0] = {
      port: 'metrics',
      intervall: '30s',
    };

    const found = problems(broken);
    expect(found).toEqual(
      expect.arrayContaining([
        'Deployment/hg-hookgate-gateway: /spec/template/spec/containers/0/ports/0/containerPort: must be integer',
        'Deployment/hg-hookgate-gateway: spec.template.spec.containers[0].securityContext.seccompProfle: unknown field (not in V1SecurityContext)',
        'StatefulSet/Redis_Primary: /spec/volumeClaimTemplates/0/spec/accessModes/1: must be equal to one of the allowed values',
        'StatefulSet/Redis_Primary: metadata.name: "Redis_Primary" is not a DNS-1123 label',
        expect.stringMatching(
          /^ServiceMonitor\/hg-hookgate: \/spec\/endpoints\/0: must NOT have additional properties .*intervall/,
        ),
      ]),
    );
    // The untouched objects stay valid.
    expect(
      found.every((p) =>
        /^(Deployment\/hg-hookgate-gateway|StatefulSet\/Redis_Primary|ServiceMonitor)/.test(p),
      ),
    ).toBe(true);
  });
});
