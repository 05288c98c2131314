// The Pulumi program's planning functions (infra/plan.ts), without the Pulumi engine.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import {
  CHART_DIR,
  DEFAULT_IMAGE_REPOSITORY,
  DEFAULT_REPLICAS,
  chartAppVersion,
  chartPath,
  chartValues,
  fullname,
  labels,
  resolveArgs,
  resourceNames,
  stackTracing,
  validateArgs,
  type PlanArgs,
  type TraceExporter,
  TRACE_EXPORTERS,
  TRACE_SAMPLERS,
} from '../../infra/plan.ts';
import { parseBytes } from '../../runtime/bounded.ts';
import {
  LOG_OUTPUT_BOUNDS as ROLE_LOG_OUTPUT_BOUNDS,
  logOutputSettings,
} from '../../roles/log-settings.ts';
import { LOG_OUTPUT_BOUNDS } from '../../infra/log-output.ts';
import {
  TRACE_EXPORTERS as ROLE_TRACE_EXPORTERS,
  TRACE_SAMPLERS as ROLE_TRACE_SAMPLERS,
} from '../../runtime/tracing/tracing.ts';
import { tracingSettings } from '../../roles/tracing-settings.ts';

const valid: PlanArgs = {
  namespace: 'hooks',
  image: { tag: '1.2.3' },
  baseUrl: 'https://hooks.example.com',
  redis: { url: 'redis://:pw@redis.hooks.svc:6379/0' },
};

const schema = JSON.parse(readFileSync(join(CHART_DIR, 'values.schema.json'), 'utf8')) as object;
const validateValues = new Ajv({ allErrors: true, strict: false }).compile(schema);

describe('resolveArgs', () => {
  it('applies the defaults', () => {
    expect(resolveArgs(valid)).toEqual({
      namespace: 'hooks',
      createNamespace: true,
      releaseName: 'hookgate',
      image: { repository: DEFAULT_IMAGE_REPOSITORY, tag: '1.2.3' },
      replicas: { operator: 2, gateway: 2, worker: 2 },
      executions: 'queue',
      maxQueued: 100_000,
      workerConcurrency: 32,
      workerClaimIdleMs: 60_000,
      queueShards: 1,
      baseUrl: 'https://hooks.example.com',
      trustedProxies: [],
      redisClient: {
        commandTimeoutMs: 1000,
        breakerFailures: 5,
        breakerOpenMs: 1000,
        writeWindowMs: 1,
      },
      logOutput: { bufferBytes: '4Mi', stallMs: 5000, syncFlushMs: 1000 },
      budgets: {},
      redis: { url: 'redis://:pw@redis.hooks.svc:6379/0' },
      crds: true,
      serviceMonitor: false,
      podDisruptionBudget: true,
      networkPolicy: false,
      grafanaDashboards: false,
      adminAuth: 'kubernetes',
      logLevel: 'info',
      traceContext: 'authenticated',
      expressionIsolation: 'inline',
      secretNamespaces: [],
    });
  });

  it("uses the chart's own Redis unless another is given", () => {
    const { redis: _url, ...withoutRedis } = valid;
    expect(resolveArgs(withoutRedis).redis).toEqual({ chart: {} });
    expect(validateArgs(withoutRedis)).toEqual([]);
  });

  it('keeps given replicas per role and drops a trailing slash from the base URL', () => {
    const r = resolveArgs({ ...valid, replicas: { gateway: 5 }, baseUrl: 'https://h.example/' });
    expect(r.replicas).toEqual({ operator: 2, gateway: 5, worker: 2 });
    expect(r.baseUrl).toBe('https://h.example');
  });

  it("defaults the execution settings and replicas to the chart's values.yaml", () => {
    const chart = parse(readFileSync(join(CHART_DIR, 'values.yaml'), 'utf8')) as {
      gateway: { executions: string; maxQueued: number };
      worker: { replicas: number; concurrency: number; claimIdleMs: number };
      operator: { replicas: number };
    };
    const r = resolveArgs(valid);
    expect(chartValues(r).gateway).toEqual({
      replicas: 2,
      executions: chart.gateway.executions,
      maxQueued: chart.gateway.maxQueued,
    });
    expect(chartValues(r).worker).toEqual({
      replicas: chart.worker.replicas,
      concurrency: chart.worker.concurrency,
      claimIdleMs: chart.worker.claimIdleMs,
    });
    expect(DEFAULT_REPLICAS.operator).toBe(chart.operator.replicas);
    const config = (
      parse(readFileSync(join(CHART_DIR, 'values.yaml'), 'utf8')) as {
        config: { redisClient: object; logOutput: object; queueShards: number };
      }
    ).config;
    expect(chartValues(r).config.redisClient).toEqual(config.redisClient);
    expect(chartValues(r).config.logOutput).toEqual(config.logOutput);
    expect(chartValues(r).config.queueShards).toBe(config.queueShards);
  });

  it('takes the byte budgets as the roles do, and refuses what they would refuse', () => {
    const budgets = {
      executionStoreBytes: '512Mi',
      storedBodyBytes: 65_536,
      executionTtlMs: 3_600_000,
      idempotencyBytes: '1.5KiB',
      streamBufferBytes: '2m',
      listPageBytes: '1gb',
      analyticsBytes: '16Mi',
      streamsPerExecution: 8,
      streamsPerProcess: 2500,
    };
    expect(validateArgs({ ...valid, budgets })).toEqual([]);
    // Set keys only: the chart renders no variable for the others (product defaults).
    expect(
      chartValues(resolveArgs({ ...valid, budgets: { storedBodyBytes: '1Mi' } })).config,
    ).toMatchObject({ budgets: { storedBodyBytes: '1Mi' } });
    expect(chartValues(resolveArgs(valid)).config).not.toHaveProperty('budgets');
    expect(
      validateArgs({
        ...valid,
        budgets: {
          executionStoreBytes: '512 megabytes',
          storedBodyBytes: '1000',
          listPageBytes: 1.5,
          executionTtlMs: 999,
          streamsPerExecution: 0,
          streamsPerProcess: 2.5,
        },
      }),
    ).toEqual([
      'budgets.executionStoreBytes must be a size of at least 1Ki (e.g. 64Ki, 256Mi), got "512 megabytes"',
      'budgets.storedBodyBytes must be a size of at least 1Ki (e.g. 64Ki, 256Mi), got "1000"',
      'budgets.listPageBytes must be a size of at least 1Ki (e.g. 64Ki, 256Mi), got 1.5',
      'budgets.streamsPerExecution must be a whole number from 1 to 1000000, got 0',
      'budgets.streamsPerProcess must be a whole number from 1 to 1000000, got 2.5',
      'budgets.executionTtlMs must be a whole number >= 1000, got 999',
    ]);
  });

  it("accepts in the chart's schema only sizes the roles can read (parseBytes)", () => {
    const base = chartValues(resolveArgs(valid));
    const withSize = (size: unknown) => ({
      ...base,
      config: { ...base.config, budgets: { storedBodyBytes: size } },
    });
    for (const size of ['1024', '64Ki', '64KiB', '64k', '64kb', '512Mi', '1.5Gi', '1g', '2048b']) {
      expect(parseBytes(size), size).toBeDefined();
      expect(validateValues(withSize(size)), size).toBe(true);
    }
    for (const size of ['64XB', '64 Ki', 'Mi', '-1Mi', '1e6', '1Ti', '']) {
      expect(validateValues(withSize(size)), size).toBe(false);
    }
    expect(validateValues(withSize(1024))).toBe(true);
    expect(validateValues(withSize(1023))).toBe(false);
    expect(validateValues(withSize(null))).toBe(true);
    const ttl = (executionTtlMs: unknown) => ({
      ...base,
      config: { ...base.config, budgets: { executionTtlMs } },
    });
    expect(validateValues(ttl(1000))).toBe(true);
    expect(validateValues(ttl(999))).toBe(false);
    expect(validateValues(ttl('1h'))).toBe(false);
    // The caps on open streams: whole numbers from 1 to 1000000, as the roles take them.
    const streams = (streamsPerExecution: unknown) => ({
      ...base,
      config: { ...base.config, budgets: { streamsPerExecution } },
    });
    for (const n of [1, 16, 1_000_000]) expect(validateValues(streams(n)), String(n)).toBe(true);
    for (const n of [0, 2.5, 1_000_001, '16'])
      expect(validateValues(streams(n)), String(n)).toBe(false);
    expect(
      validateValues({ ...base, config: { ...base.config, budgets: { maxBytes: '1Mi' } } }),
    ).toBe(false);
    // The chart's defaults are null: the product's own.
    const config = (
      parse(readFileSync(join(CHART_DIR, 'values.yaml'), 'utf8')) as {
        config: { budgets: Record<string, unknown> };
      }
    ).config;
    expect(Object.values(config.budgets)).toEqual(Array(9).fill(null));
  });

  it('refuses Redis client settings below 1', () => {
    expect(
      validateArgs({ ...valid, redisClient: { commandTimeoutMs: 0, breakerOpenMs: 1.5 } }),
    ).toEqual([
      'redisClient.commandTimeoutMs must be a whole number >= 1, got 0',
      'redisClient.breakerOpenMs must be a whole number >= 1, got 1.5',
    ]);
  });

  it('refuses a write window outside 0 to 50 ms', () => {
    expect(validateArgs({ ...valid, redisClient: { writeWindowMs: -1 } })).toEqual([
      'redisClient.writeWindowMs must be a whole number >= 0, got -1',
    ]);
    expect(validateArgs({ ...valid, redisClient: { writeWindowMs: 51 } })).toEqual([
      'redisClient.writeWindowMs must be at most 50, got 51',
    ]);
    expect(validateArgs({ ...valid, redisClient: { writeWindowMs: 0 } })).toEqual([]);
    expect(
      validateArgs({
        ...valid,
        tracing: {
          endpoint: 'collector:4318',
          sampler: 'jaeger_remote' as 'always_on',
          samplerRatio: 1.5,
        },
      }),
    ).toEqual([
      'tracing.endpoint must be an http:// or https:// URL, got "collector:4318"',
      'tracing.sampler must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio, got "jaeger_remote"',
      'tracing.samplerRatio must be from 0 to 1, got 1.5',
    ]);
    expect(validateArgs({ ...valid, tracing: { endpoint: 'http://c.obs:4318' } })).toEqual([]);
    // The exporters as the roles read OTEL_TRACES_EXPORTER: the endpoint only for otlp.
    expect(validateArgs({ ...valid, tracing: { exporters: ['console'] } })).toEqual([]);
    expect(
      validateArgs({
        ...valid,
        tracing: { endpoint: 'http://c.obs:4318', exporters: ['otlp', 'console', 'otlp'] },
      }),
    ).toEqual([]);
    expect(validateArgs({ ...valid, tracing: { exporters: ['otlp', 'console'] } })).toEqual([
      'tracing.endpoint is needed with otlp in tracing.exporters (the default)',
    ]);
    expect(validateArgs({ ...valid, tracing: {} })).toEqual([
      'tracing.endpoint is needed with otlp in tracing.exporters (the default)',
    ]);
    expect(
      validateArgs({ ...valid, tracing: { exporters: ['console', 'zipkin' as 'otlp'] } }),
    ).toEqual(['tracing.exporters must list otlp, console or none, got "zipkin"']);
    // Tracing on with nothing to export is a contradiction the chart refuses too.
    for (const exporters of [[], ['none'], ['none', 'none']] satisfies TraceExporter[][])
      expect(validateArgs({ ...valid, tracing: { exporters } })).toEqual([
        'tracing.exporters must list otlp or console (none exports nothing); leave tracing out to turn it off',
      ]);
    // The OTLP protocol, as the roles and the chart take it: with otlp only.
    const otlp = { endpoint: 'http://c.obs:4318' };
    for (const protocol of ['http/protobuf', 'http/json', 'grpc'] as const)
      expect(validateArgs({ ...valid, tracing: { ...otlp, protocol } })).toEqual([]);
    expect(
      validateArgs({ ...valid, tracing: { ...otlp, protocol: 'http/thrift' as 'http/json' } }),
    ).toEqual(['tracing.protocol must be http/protobuf, http/json or grpc, got "http/thrift"']);
    expect(
      validateArgs({
        ...valid,
        tracing: { exporters: ['console'], protocol: 'thrift' as 'http/json' },
      }),
    ).toEqual([]);
    // With grpc the endpoint is the collector's address: a path or query is refused, as
    // the roles refuse it at start and the chart at render.
    expect(
      validateArgs({ ...valid, tracing: { endpoint: 'https://c.obs:4317/', protocol: 'grpc' } }),
    ).toEqual([]);
    for (const endpoint of ['http://c.obs:4318/v1/traces', 'http://c.obs:4317?tenant'])
      expect(validateArgs({ ...valid, tracing: { endpoint, protocol: 'grpc' } })).toEqual([
        `tracing.endpoint must be the collector's address without a path or query for grpc (e.g. http://collector:4317), got "${endpoint}"`,
      ]);
    for (const endpoint of ['http://c.obs', 'http://c.obs:80'])
      expect(validateArgs({ ...valid, tracing: { endpoint, protocol: 'grpc' } })).toEqual([
        `tracing.endpoint must name the collector's port for plaintext grpc (gRPC's default is 443), e.g. http://collector:4317, got "${endpoint}"`,
      ]);
    expect(
      validateArgs({
        ...valid,
        tracing: { endpoint: 'http://c.obs:4318/v1/traces', protocol: 'http/json' },
      }),
    ).toEqual([]);
  });

  it('takes the log output settings within the bounds the roles and the chart hold them to', () => {
    expect(
      validateArgs({ ...valid, logOutput: { bufferBytes: '64Ki', stallMs: 100, syncFlushMs: 0 } }),
    ).toEqual([]);
    expect(
      validateArgs({
        ...valid,
        logOutput: { bufferBytes: 67_108_864, stallMs: 20_000, syncFlushMs: 4000 },
      }),
    ).toEqual([]);
    expect(
      chartValues(resolveArgs({ ...valid, logOutput: { stallMs: 2000 } })).config.logOutput,
    ).toEqual({ bufferBytes: '4Mi', stallMs: 2000, syncFlushMs: 1000 });
    expect(
      validateArgs({ ...valid, logOutput: { bufferBytes: '1Gi', stallMs: 50, syncFlushMs: 1.5 } }),
    ).toEqual([
      'logOutput.bufferBytes must be a size from 64Ki to 64Mi (e.g. 4Mi), got "1Gi"',
      'logOutput.stallMs must be a whole number from 100 to 20000, got 50',
      'logOutput.syncFlushMs must be a whole number from 0 to 4000, got 1.5',
    ]);
    expect(validateArgs({ ...valid, logOutput: { bufferBytes: 65_535 } })).toEqual([
      'logOutput.bufferBytes must be a size from 64Ki to 64Mi (e.g. 4Mi), got 65535',
    ]);
    expect(validateArgs({ ...valid, logOutput: { syncFlushMs: 4001 } })).toEqual([
      'logOutput.syncFlushMs must be a whole number from 0 to 4000, got 4001',
    ]);
  });

  it('refuses exactly the log output settings the roles refuse, and the chart schema with them', () => {
    expect(LOG_OUTPUT_BOUNDS).toEqual(ROLE_LOG_OUTPUT_BOUNDS);
    const chartSchema = schema as {
      properties: { config: { properties: { logOutput: { properties: Record<string, object> } } } };
    };
    const { bufferBytes, stallMs, syncFlushMs } =
      chartSchema.properties.config.properties.logOutput.properties;
    expect(bufferBytes).toMatchObject({
      minimum: LOG_OUTPUT_BOUNDS.bufferBytes.min,
      maximum: LOG_OUTPUT_BOUNDS.bufferBytes.max,
    });
    expect(stallMs).toMatchObject({
      minimum: LOG_OUTPUT_BOUNDS.stallMs.min,
      maximum: LOG_OUTPUT_BOUNDS.stallMs.max,
    });
    expect(syncFlushMs).toMatchObject({
      minimum: LOG_OUTPUT_BOUNDS.syncFlushMs.min,
      maximum: LOG_OUTPUT_BOUNDS.syncFlushMs.max,
    });
    const base = chartValues(resolveArgs(valid));
    const cases: [keyof typeof LOG_OUTPUT_BOUNDS, string, string | number][] = [
      ...[
        '64Ki',
        '64KiB',
        '65536',
        '4Mi',
        '0.5Mi',
        '64Mi',
        '64mb',
        '63Ki',
        '65Mi',
        '1Gi',
        '4 megs',
        '4XB',
      ].map((size): [keyof typeof LOG_OUTPUT_BOUNDS, string, string] => [
        'bufferBytes',
        'HOOKGATE_LOG_BUFFER_BYTES',
        size,
      ]),
      ...[99, 100, 5000, 20_000, 20_001, 1.5].map(
        (ms): [keyof typeof LOG_OUTPUT_BOUNDS, string, number] => [
          'stallMs',
          'HOOKGATE_LOG_STALL_MS',
          ms,
        ],
      ),
      ...[-1, 0, 1000, 5000, 5001].map((ms): [keyof typeof LOG_OUTPUT_BOUNDS, string, number] => [
        'syncFlushMs',
        'HOOKGATE_LOG_SYNC_FLUSH_MS',
        ms,
      ]),
    ];
    for (const [key, variable, value] of cases) {
      const pulumi = validateArgs({ ...valid, logOutput: { [key]: value } }).length === 0;
      const role = logOutputSettings({ [variable]: String(value) }).problems.length === 0;
      expect(pulumi, `${key}=${value}`).toBe(role);
      // The schema refuses what it can see (plain numbers, the form of a size); a size
      // with a unit out of bounds passes it and fails the chart's render (helm.test.ts).
      const values = {
        ...base,
        config: { ...base.config, logOutput: { ...base.config.logOutput, [key]: value } },
      };
      if (validateValues(values))
        expect(typeof value === 'string' || role, `${key}=${value}`).toBe(true);
      else expect(role, `${key}=${value}`).toBe(false);
    }
  });

  it('refuses a write window not below the command timeout (the gateway would not start)', () => {
    expect(
      validateArgs({ ...valid, redisClient: { commandTimeoutMs: 20, writeWindowMs: 20 } }),
    ).toEqual([
      'redisClient.writeWindowMs must be below redisClient.commandTimeoutMs (20) or 0, got 20',
    ]);
    expect(
      validateArgs({ ...valid, redisClient: { commandTimeoutMs: 20, writeWindowMs: 0 } }),
    ).toEqual([]);
  });
});

describe('validateArgs', () => {
  it('accepts valid arguments', () => {
    expect(validateArgs(valid)).toEqual([]);
    expect(
      validateArgs({
        ...valid,
        releaseName: 'edge',
        trustedProxies: ['10.0.0.0/8', 'fd00::/8'],
        redis: { existingSecret: { name: 'redis.creds', key: 'url' } },
        replicas: { operator: 1, gateway: 0, worker: 10 },
        executions: 'inline',
        maxQueued: 1,
        workerConcurrency: 1,
        workerClaimIdleMs: 1000,
      }),
    ).toEqual([]);
  });

  it('reports every problem with a readable message', () => {
    const errors = validateArgs({
      namespace: 'Hooks_NS',
      releaseName: 'x'.repeat(41),
      image: { repository: 'ghcr.io/hookgate/hookgate:latest', tag: 'bad tag' },
      replicas: { operator: -1, gateway: 1.5, worker: -2 },
      executions: 'sync' as 'queue',
      adminAuth: 'token' as 'none',
      maxQueued: 0,
      workerConcurrency: 0,
      workerClaimIdleMs: 999,
      queueShards: 257,
      baseUrl: 'ftp://hooks.example.com',
      trustedProxies: ['10.0.0.0/33', 'proxy'],
      redis: { url: 'http://redis:6379' },
    });
    expect(errors).toEqual([
      'namespace "Hooks_NS" is not a DNS-1123 label',
      `releaseName "${'x'.repeat(41)}" must be a DNS-1123 label of at most 40 characters`,
      'image.repository "ghcr.io/hookgate/hookgate:latest" must be a repository without a tag',
      'image.tag "bad tag" is not a valid tag',
      'replicas.operator must be a whole number >= 0, got -1',
      'replicas.gateway must be a whole number >= 0, got 1.5',
      'replicas.worker must be a whole number >= 0, got -2',
      'executions must be queue or inline, got "sync"',
      'adminAuth must be kubernetes or none, got "token"',
      'maxQueued must be a whole number >= 1, got 0',
      'workerConcurrency must be a whole number >= 1, got 0',
      'workerClaimIdleMs must be a whole number >= 1000, got 999',
      'queueShards must be a whole number from 1 to 256, got 257',
      'baseUrl "ftp://hooks.example.com" must use http or https',
      'trustedProxies: "10.0.0.0/33" is not a CIDR',
      'trustedProxies: "proxy" is not a CIDR',
      'redis.url must start with redis://, rediss:// or redis+cluster://',
    ]);
  });

  it('takes a Redis Cluster URL, as the roles do', () => {
    for (const url of ['redis+cluster://:pw@a:6379,b:6379', 'rediss+cluster://a:6379']) {
      expect(validateArgs({ ...valid, redis: { url } }), url).toEqual([]);
    }
  });

  it("follows the roles' REDIS_URL rule: what they take at start, and what they refuse", () => {
    for (const url of ['redis-master:6379', 'redis://h:6379/2?family=6']) {
      expect(validateArgs({ ...valid, redis: { url } }), url).toEqual([]);
    }
    // Refused by the roles at start (a CrashLoop after an apply): refused at preview.
    expect(validateArgs({ ...valid, redis: { url: 'redis://h:6379/cache' } })).toEqual([
      'redis.url names a database that is not a number',
    ]);
  });

  it('refuses base URLs that are relative or carry credentials, a query or a fragment', () => {
    expect(validateArgs({ ...valid, baseUrl: '/webhook' })).toEqual([
      'baseUrl "/webhook" is not an absolute URL',
    ]);
    for (const baseUrl of [
      'https://u:p@h.example',
      'https://h.example/?a=1',
      'https://h.example/#x',
    ]) {
      expect(validateArgs({ ...valid, baseUrl })).toEqual([
        `baseUrl "${baseUrl}" must not carry credentials, a query or a fragment`,
      ]);
    }
  });

  it('checks an existing Redis Secret reference', () => {
    expect(
      validateArgs({ ...valid, redis: { existingSecret: { name: 'Redis!', key: 'a/b' } } }),
    ).toEqual([
      'redis.existingSecret.name "Redis!" is not a valid Secret name',
      'redis.existingSecret.key "a/b" is not a valid Secret key',
    ]);
  });

  it("checks the chart Redis's storage and password Secret", () => {
    expect(
      validateArgs({
        ...valid,
        redis: {
          chart: {
            storageSize: '20Gi',
            storageClass: 'fast-ssd',
            passwordSecret: { name: 'redis-auth', key: 'pw' },
          },
        },
      }),
    ).toEqual([]);
    expect(
      validateArgs({
        ...valid,
        redis: {
          chart: {
            storageSize: '20 GB',
            storageClass: 'Fast_SSD',
            passwordSecret: { name: 'Redis!', key: 'a/b' },
          },
        },
      }),
    ).toEqual([
      'redis.chart.storageSize "20 GB" is not a Kubernetes quantity',
      'redis.chart.storageClass "Fast_SSD" is not a valid StorageClass name',
      'redis.chart.passwordSecret.name "Redis!" is not a valid Secret name',
      'redis.chart.passwordSecret.key "a/b" is not a valid Secret key',
    ]);
  });

  it('leaves a Redis URL that is not a plain string (a config secret) to the caller', () => {
    const url: { secret: true } = { secret: true };
    expect(validateArgs<typeof url>({ ...valid, redis: { url } })).toEqual([]);
  });
});

describe('names and labels', () => {
  it('mirrors the chart helper "hookgate.fullname"', () => {
    expect(fullname('hookgate')).toBe('hookgate');
    expect(fullname('edge')).toBe('edge-hookgate');
    expect(fullname('prod-hookgate-eu')).toBe('prod-hookgate-eu');
  });

  it('derives every object name from the release', () => {
    expect(resourceNames('edge')).toEqual({
      fullname: 'edge-hookgate',
      gatewayService: 'edge-hookgate-gateway',
      adminService: 'edge-hookgate-admin',
      metricsService: 'edge-hookgate-metrics',
      redis: 'edge-hookgate-redis',
      redisUrlSecret: 'edge-hookgate-redis-url',
      deployments: {
        operator: 'edge-hookgate-operator',
        gateway: 'edge-hookgate-gateway',
        worker: 'edge-hookgate-worker',
      },
    });
  });

  it('labels its own objects with the recommended labels, managed by pulumi', () => {
    expect(labels('edge', 'redis')).toEqual({
      'app.kubernetes.io/name': 'hookgate',
      'app.kubernetes.io/instance': 'edge',
      'app.kubernetes.io/component': 'redis',
      'app.kubernetes.io/part-of': 'hookgate',
      'app.kubernetes.io/managed-by': 'pulumi',
    });
  });
});

describe('outbound policy', () => {
  it('passes the policy to the chart and refuses what the runtime would refuse', () => {
    const outbound = {
      allow: ['*.svc.cluster.local'],
      namespaces: { payments: { deny: ['10.0.0.0/8'] } },
    };
    expect(validateArgs({ ...valid, outbound })).toEqual([]);
    expect(chartValues(resolveArgs({ ...valid, outbound })).outbound).toEqual({
      allow: ['*.svc.cluster.local'],
      deny: [],
      namespaces: { payments: { deny: ['10.0.0.0/8'] } },
    });
    expect(chartValues(resolveArgs(valid)).outbound).toBeUndefined();
    expect(
      validateArgs({
        ...valid,
        outbound: {
          allow: ['169.254.169.254/32'],
          deny: ['10.0.0.0/99'],
          namespaces: { Team_B: {}, shop: { allow: ['exa mple'] } },
        },
      }),
    ).toEqual([
      "outbound.allow: '169.254.169.254/32' is a metadata or unspecified address, which is never allowed",
      "outbound.deny: '10.0.0.0/99' is not a CIDR",
      'outbound.namespaces: "Team_B" is not a namespace name',
      "outbound.namespaces.shop.allow: 'exa mple' is not a valid host name",
    ]);
  });
});

describe('secretNamespaces', () => {
  it('narrows the operator to Roles in those namespaces, and refuses a name that is not one', () => {
    const secretNamespaces = ['team-a', 'team-b'];
    expect(validateArgs({ ...valid, secretNamespaces })).toEqual([]);
    expect(chartValues(resolveArgs({ ...valid, secretNamespaces })).rbac).toEqual({
      secretNamespaces,
    });
    expect(chartValues(resolveArgs(valid)).rbac).toBeUndefined();
    expect(validateArgs({ ...valid, secretNamespaces: ['Team_B'] })).toEqual([
      'secretNamespaces: "Team_B" is not a namespace name',
    ]);
  });
});

describe('chartValues', () => {
  it('writes expressionIsolation only when worker, and the chart schema takes it', () => {
    expect(chartValues(resolveArgs(valid)).config).not.toHaveProperty('expressionIsolation');
    const values = chartValues(resolveArgs({ ...valid, expressionIsolation: 'worker' }));
    expect(values.config.expressionIsolation).toBe('worker');
    expect(validateValues(values), JSON.stringify(validateValues.errors)).toBe(true);
  });

  it('sets the chart values from the arguments, never the Redis URL', () => {
    // A Redis of your own, by URL: the URL goes into the component's Secret only.
    const values = chartValues(
      resolveArgs({
        ...valid,
        trustedProxies: ['10.0.0.0/8'],
        replicas: { worker: 4 },
        workerConcurrency: 64,
        serviceMonitor: true,
        logLevel: 'debug',
        traceContext: 'off',
      }),
    );
    expect(values).toEqual({
      image: { repository: DEFAULT_IMAGE_REPOSITORY, tag: '1.2.3' },
      crds: { enabled: true },
      config: {
        baseUrl: 'https://hooks.example.com',
        trustedProxies: ['10.0.0.0/8'],
        logLevel: 'debug',
        traceContext: 'off',
        redisClient: {
          commandTimeoutMs: 1000,
          breakerFailures: 5,
          breakerOpenMs: 1000,
          writeWindowMs: 1,
        },
        logOutput: { bufferBytes: '4Mi', stallMs: 5000, syncFlushMs: 1000 },
        queueShards: 1,
      },
      redis: { enabled: false },
      externalRedis: {
        url: '',
        existingSecret: { name: 'hookgate-redis-url', key: 'redis-url' },
      },
      operator: { replicas: 2, leaderElection: { enabled: true } },
      gateway: { replicas: 2, executions: 'queue', maxQueued: 100_000 },
      worker: { replicas: 4, concurrency: 64, claimIdleMs: 60_000 },
      metrics: { serviceMonitor: { enabled: true } },
      podDisruptionBudget: { enabled: true },
      networkPolicy: { enabled: false },
      admin: { auth: 'kubernetes' },
    });
    expect(JSON.stringify(values)).not.toContain(':pw@');
  });

  it('points at an existing Redis Secret as given, the key defaulting to redis-url', () => {
    const own = chartValues(
      resolveArgs({ ...valid, redis: { existingSecret: { name: 'shared', key: 'url' } } }),
    );
    expect(own.redis).toEqual({ enabled: false });
    expect(own.externalRedis).toEqual({
      url: '',
      existingSecret: { name: 'shared', key: 'url' },
    });
    const defaulted = chartValues(
      resolveArgs({ ...valid, redis: { existingSecret: { name: 'shared' } } }),
    );
    expect(defaulted.externalRedis.existingSecret.key).toBe('redis-url');
  });

  it("turns the chart's Redis on, passing only what was given", () => {
    const plain = chartValues(resolveArgs({ ...valid, redis: { chart: {} } }));
    expect(plain.redis).toEqual({ enabled: true });
    expect(plain.externalRedis).toEqual({
      url: '',
      existingSecret: { name: '', key: 'redis-url' },
    });
    const tuned = chartValues(
      resolveArgs({
        ...valid,
        redis: {
          chart: {
            storageSize: '20Gi',
            storageClass: 'fast-ssd',
            passwordSecret: { name: 'redis-auth' },
          },
        },
      }),
    );
    expect(tuned.redis).toEqual({
      enabled: true,
      persistence: { size: '20Gi', storageClass: 'fast-ssd' },
      auth: { existingSecret: 'redis-auth', existingSecretKey: 'redis-password' },
    });
  });

  it('installs the CRDs with the chart unless asked not to', () => {
    expect(chartValues(resolveArgs(valid)).crds).toEqual({ enabled: true });
    expect(chartValues(resolveArgs({ ...valid, crds: false })).crds).toEqual({ enabled: false });
  });

  it('runs a single operator replica without leader election, more with it', () => {
    const one = chartValues(resolveArgs({ ...valid, replicas: { operator: 1 } }));
    expect(one.operator).toEqual({ replicas: 1, leaderElection: { enabled: false } });
    const three = chartValues(resolveArgs({ ...valid, replicas: { operator: 3 } }));
    expect(three.operator).toEqual({ replicas: 3, leaderElection: { enabled: true } });
  });

  it('grafanaDashboards passes grafana.dashboards.enabled, with the recording rules only', () => {
    expect(chartValues(resolveArgs(valid)).grafana).toBeUndefined();
    const rules = { prometheus: { rules: { enabled: true } } };
    const args = { ...valid, grafanaDashboards: true, analytics: rules };
    expect(validateArgs(args)).toEqual([]);
    expect(chartValues(resolveArgs(args)).grafana).toEqual({ dashboards: { enabled: true } });
    expect(validateArgs({ ...valid, grafanaDashboards: true })).toEqual([
      "grafanaDashboards needs analytics.prometheus.rules.enabled: the dashboard's request panels read its recording rules",
    ]);
  });

  it('callbackSecret passes config.callbackSecret, its key defaulting to secrets', () => {
    expect(chartValues(resolveArgs(valid)).config.callbackSecret).toBeUndefined();
    const named = { ...valid, callbackSecret: { name: 'cb-signing' } };
    expect(validateArgs(named)).toEqual([]);
    expect(chartValues(resolveArgs(named)).config.callbackSecret).toEqual({
      name: 'cb-signing',
      key: 'secrets',
    });
    expect(validateArgs({ ...valid, callbackSecret: { name: 'Bad_Name', key: 'a b' } })).toEqual([
      'callbackSecret.name "Bad_Name" is not a valid Secret name',
      'callbackSecret.key "a b" is not a valid Secret key',
    ]);
  });

  it("produces values the chart's values.schema.json accepts (and the schema is strict)", () => {
    for (const args of [
      valid,
      { ...valid, callbackSecret: { name: 'cb', key: 'current' } },
      {
        ...valid,
        grafanaDashboards: true,
        analytics: { prometheus: { rules: { enabled: true } } },
      },
      { ...valid, redis: { existingSecret: { name: 'shared' } } },
      { ...valid, redis: { chart: {} } },
      {
        ...valid,
        redis: {
          chart: { storageSize: '1Gi', storageClass: 'x', passwordSecret: { name: 'p', key: 'k' } },
        },
      },
      { ...valid, networkPolicy: true, podDisruptionBudget: true, serviceMonitor: true },
      { ...valid, executions: 'inline', replicas: { worker: 0 } },
      { ...valid, maxQueued: 1, workerConcurrency: 1, workerClaimIdleMs: 1000 },
      { ...valid, tracing: { endpoint: 'http://c.obs:4318' } },
      { ...valid, tracing: { exporters: ['console', 'none'] } },
    ] satisfies PlanArgs[]) {
      const values = chartValues(resolveArgs(args));
      expect(validateValues(values), JSON.stringify(validateValues.errors)).toBe(true);
    }
    const typo = { ...chartValues(resolveArgs(valid)), gateway: { replcas: 2 } };
    expect(validateValues(typo)).toBe(false);
    // The schema and validateArgs agree on the limits.
    const base = chartValues(resolveArgs(valid));
    for (const bad of [
      { ...base, gateway: { ...base.gateway, executions: 'sync' } },
      { ...base, gateway: { ...base.gateway, maxQueued: 0 } },
      { ...base, worker: { ...base.worker, concurrency: 0 } },
      { ...base, worker: { ...base.worker, concurrency: 2.5 } },
      { ...base, worker: { ...base.worker, claimIdleMs: 999 } },
      { ...base, config: { ...base.config, queueShards: 0 } },
      { ...base, config: { ...base.config, queueShards: 257 } },
    ]) {
      expect(validateValues(bad), JSON.stringify(bad)).toBe(false);
    }
  });
});

describe('chart files', () => {
  it('gives the chart path relative to the working directory, and its appVersion', () => {
    expect(chartPath(join(CHART_DIR, '..', '..', 'infra'))).toBe('../charts/hookgate');
    expect(chartPath(join(CHART_DIR, '..', '..'))).toBe('charts/hookgate');
    expect(chartAppVersion()).toBe('0.1.0');
  });

  it("defaults the image to the chart's: what `npm run image` builds", () => {
    const chart = parse(readFileSync(join(CHART_DIR, 'values.yaml'), 'utf8')) as {
      image: { repository: string };
    };
    expect(DEFAULT_IMAGE_REPOSITORY).toBe('localhost/hookgate');
    expect(chart.image.repository).toBe(DEFAULT_IMAGE_REPOSITORY);
  });
});

describe('the tracing exporters', () => {
  it('are the same list in the Pulumi program, the roles and the chart schema', () => {
    const values = JSON.parse(readFileSync(join(CHART_DIR, 'values.schema.json'), 'utf8')) as {
      properties: {
        config: {
          properties: {
            tracing: { properties: { exporters: { items: { pattern: string } } } };
          };
        };
      };
    };
    // The chart takes the roles' names as they read them: any case, blanks around.
    const chart = values.properties.config.properties.tracing.properties.exporters.items.pattern;
    expect([...TRACE_EXPORTERS]).toEqual([...ROLE_TRACE_EXPORTERS]);
    expect(chart).toBe(`^\\s*(?i:${ROLE_TRACE_EXPORTERS.join('|')})?\\s*$`);
  });

  it('reach the chart as given, otlp by default', () => {
    const tracing = (args: PlanArgs['tracing']) =>
      chartValues(resolveArgs({ ...valid, ...(args ? { tracing: args } : {}) })).config.tracing;
    expect(tracing({ endpoint: 'http://c.obs:4318' })).toMatchObject({
      enabled: true,
      exporters: ['otlp'],
      endpoint: 'http://c.obs:4318',
      // The specification's default protocol, as the roles' default.
      protocol: 'http/protobuf',
    });
    expect(tracing({ endpoint: 'http://c.obs:4318', protocol: 'http/json' })).toMatchObject({
      protocol: 'http/json',
    });
    expect(tracing({ exporters: ['console'] })).toMatchObject({
      enabled: true,
      exporters: ['console'],
      endpoint: '',
    });
    expect(tracing(undefined)).toBeUndefined();
  });
});

describe('the stack config tracingExporters', () => {
  // What a role reads in OTEL_TRACES_EXPORTER, the Pulumi program reads in
  // tracingExporters: the same refusals (at preview rather than at start), the same off,
  // the same exporters.
  const endpoint = 'http://c.obs:4318';
  it.each([
    'otlp',
    'console',
    'OTLP',
    ' Console , OTLP ',
    'otlp,console',
    'console,otlp,console',
    'otlp,otlp',
    'otlp,none',
    'None,Console',
    'none',
    'NONE',
    'none,none',
    '',
    ',',
    ' , ',
    'otlp,',
    'zipkin',
    'otlp,zipkin',
    'OTLP,Zipkin',
    'none,jaeger,logging',
  ])('%j as the roles read it', (value) => {
    const role = tracingSettings('gateway', {
      OTEL_TRACES_EXPORTER: value,
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
    });
    const stack = () => stackTracing(endpoint, value);
    const [refusal] = role.problems;
    if (refusal !== undefined) {
      expect(stack).toThrow(new Error(refusal.replace('OTEL_TRACES_EXPORTER', 'tracingExporters')));
      return;
    }
    const tracing = stack();
    if (role.config === undefined) {
      expect(tracing).toBeUndefined();
      return;
    }
    expect({
      otlp: tracing?.exporters?.includes('otlp'),
      console: tracing?.exporters?.includes('console'),
    }).toEqual({ otlp: role.config.endpoint !== undefined, console: role.config.console });
    // What the program hands the component deploys: checked, and valid chart values.
    const args = { ...valid, ...(tracing ? { tracing } : {}) };
    expect(validateArgs(args)).toEqual([]);
    expect(validateValues(chartValues(resolveArgs(args)))).toBe(true);
  });

  it('names the config key in its refusal; unset, the endpoint alone turns otlp on', () => {
    expect(() => stackTracing(undefined, 'otlp,zipkin')).toThrow(
      'tracingExporters must list otlp, console or none (hookgate exports OTLP, or spans as log lines), not "zipkin"',
    );
    expect(stackTracing(undefined, undefined)).toBeUndefined();
    expect(stackTracing('', undefined)).toBeUndefined();
    expect(stackTracing(endpoint, undefined)).toEqual({ endpoint });
    expect(stackTracing(undefined, 'Console')).toEqual({ exporters: ['console'] });
    expect(stackTracing(endpoint, 'OTLP, none, console')).toEqual({
      endpoint,
      exporters: ['otlp', 'console'],
    });
    // `none` turns tracing off beside an endpoint too, as OTEL_TRACES_EXPORTER=none does.
    expect(stackTracing(endpoint, 'none')).toBeUndefined();
    expect(stackTracing(endpoint, ',')).toBeUndefined();
  });
});

describe('the stack config tracingProtocol', () => {
  // What a role reads in OTEL_EXPORTER_OTLP_PROTOCOL, the Pulumi program reads in
  // tracingProtocol: the same refusals (at preview rather than at start), the same
  // protocol, the default when blank; and the chart values it gives are valid.
  const endpoint = 'http://c.obs:4318';
  it.each([
    'http/protobuf',
    'HTTP/PROTOBUF',
    'http/json',
    ' Http/Json ',
    '',
    '  ',
    'grpc',
    ' GRPC',
    'http/thrift',
    'http/protobuf,http/json',
  ])('%j as the roles read it', (value) => {
    const role = tracingSettings('gateway', {
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: value,
    });
    const stack = () => stackTracing(endpoint, undefined, value);
    const [refusal] = role.problems;
    if (refusal !== undefined) {
      expect(stack).toThrow(
        new Error(refusal.replace('OTEL_EXPORTER_OTLP_PROTOCOL', 'tracingProtocol')),
      );
      return;
    }
    const tracing = stack();
    const args = { ...valid, ...(tracing ? { tracing } : {}) };
    expect(validateArgs(args)).toEqual([]);
    const values = chartValues(resolveArgs(args));
    expect(validateValues(values)).toBe(true);
    expect(values.config.tracing?.protocol).toBe(role.config?.protocol);
  });

  it('is read only with otlp, as the roles read it; unset is the default', () => {
    expect(stackTracing(endpoint, undefined, undefined)).toEqual({ endpoint });
    expect(stackTracing(endpoint, 'otlp', 'HTTP/JSON')).toEqual({
      endpoint,
      exporters: ['otlp'],
      protocol: 'http/json',
    });
    // Console alone exports no OTLP: the protocol is not read, as the roles do not.
    expect(stackTracing(undefined, 'console', 'grpc')).toEqual({ exporters: ['console'] });
    expect(stackTracing(endpoint, 'none', 'grpc')).toBeUndefined();
    expect(stackTracing(endpoint, 'otlp,console', ' GRPC ')).toEqual({
      endpoint,
      exporters: ['otlp', 'console'],
      protocol: 'grpc',
    });
    expect(() => stackTracing(endpoint, 'otlp,console', 'thrift')).toThrow(
      'tracingProtocol must be http/protobuf, http/json or grpc, not "thrift"',
    );
  });
});

describe('the tracing samplers', () => {
  it('are the same list in the Pulumi program, the roles and the chart schema', () => {
    // The chart's schema keeps its own list: a sampler added on one side only would pass
    // one check and fail the other at deploy time.
    const values = JSON.parse(readFileSync(join(CHART_DIR, 'values.schema.json'), 'utf8')) as {
      properties: {
        config: { properties: { tracing: { properties: { sampler: { enum: string[] } } } } };
      };
    };
    const chart = values.properties.config.properties.tracing.properties.sampler.enum;
    expect([...TRACE_SAMPLERS]).toEqual([...ROLE_TRACE_SAMPLERS]);
    expect(chart).toEqual([...ROLE_TRACE_SAMPLERS]);
  });
});
