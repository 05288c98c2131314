// The program entry (infra/index.ts) under strict mocks: it reads the stack config,
// builds one HookgateDeployment and exports its outputs.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as pulumi from '@pulumi/pulumi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chartAppVersion } from '../../infra/plan.ts';
import { eventually } from '../support/eventually.ts';
import type * as Program from '../../infra/index.ts';
import { T, installStrictMocks, valueOf, type Recorder } from './mocks.ts';

let rec: Recorder;
let program: typeof Program;

beforeAll(async () => {
  rec = await installStrictMocks();
  pulumi.runtime.setAllConfig(
    {
      'hookgate:baseUrl': 'https://hooks.example.com',
      'hookgate:namespace': 'hooks-prod',
      'hookgate:gatewayReplicas': '3',
      'hookgate:trustedProxies': '["10.0.0.0/8"]',
      'hookgate:redisUrl': 'rediss://:pw@redis.example.com:6380',
      'hookgate:serviceMonitor': 'true',
      'hookgate:workerConcurrency': '48',
      'hookgate:workerClaimIdleMs': '90000',
      'hookgate:executionStoreBytes': '1Gi',
      'hookgate:executionTtlMs': '3600000',
      'hookgate:logBufferBytes': '16Mi',
      'hookgate:logStallMs': '2000',
      'hookgate:adminAuth': 'none',
      'hookgate:tracingExporters': ' Console,none',
      'hookgate:networkPolicy': 'true',
      'hookgate:networkPolicyEgress': JSON.stringify({
        apiServer: { cidrs: ['172.18.0.2/32'], ports: [6443] },
        externalRedis: { to: [{ ipBlock: { cidr: '10.1.2.3/32' } }], ports: [6380] },
      }),
    },
    ['hookgate:redisUrl'],
  );
  program = await import('../../infra/index.ts');
});

afterAll(() => {
  expect(rec.refused).toEqual([]);
});

describe('infra/index.ts', () => {
  it('deploys one HookgateDeployment from the stack config and exports its outputs', async () => {
    expect(await valueOf(program.namespace)).toBe('hooks-prod');
    expect(program.gatewayService).toBe('hookgate-gateway');
    expect(program.baseUrl).toBe('https://hooks.example.com');
    expect(program.crdsInstalled).toBe(true);

    const chart = await eventually(() => {
      const found = rec.registrations.find((r) => r.type === T.chart);
      if (!found) throw new Error('no Chart registered yet');
      return found;
    });
    expect(rec.registrations.filter((r) => r.type === T.component).map((r) => r.name)).toEqual([
      'hookgate',
    ]);
    expect(chart.inputs['values']).toMatchObject({
      image: { tag: chartAppVersion() },
      crds: { enabled: true },
      config: {
        baseUrl: 'https://hooks.example.com',
        trustedProxies: ['10.0.0.0/8'],
        // Only the budgets the stack sets: the others keep the product's defaults.
        budgets: { executionStoreBytes: '1Gi', executionTtlMs: 3_600_000 },
        // The keys the stack sets, the chart's defaults for the others.
        logOutput: { bufferBytes: '16Mi', stallMs: 2000, syncFlushMs: 1000 },
        // tracingExporters as the roles read OTEL_TRACES_EXPORTER: any case, none adds none.
        tracing: { enabled: true, exporters: ['console'], endpoint: '' },
      },
      operator: { replicas: 2 },
      gateway: { replicas: 3, executions: 'queue', maxQueued: 100_000 },
      worker: { replicas: 2, concurrency: 48, claimIdleMs: 90_000 },
      metrics: { serviceMonitor: { enabled: true } },
      admin: { auth: 'none' },
      // The object config key, with the chart's defaults filled in for the rest.
      networkPolicy: {
        enabled: true,
        egress: {
          enabled: true,
          apiServer: { cidrs: ['172.18.0.2/32'], ports: [6443], omit: false },
          externalRedis: { to: [{ ipBlock: { cidr: '10.1.2.3/32' } }], ports: [6380] },
          dns: { ports: [53] },
        },
      },
    });
    // The secret config value reaches the Secret, still secret, and nothing else.
    const secret = rec.registrations.find((r) => r.type === T.secret);
    expect(JSON.stringify(secret?.inputs['stringData'])).toContain(
      'rediss://:pw@redis.example.com',
    );
    expect(JSON.stringify(chart.inputs)).not.toContain(':pw@');
  });

  it('loads with Node type stripping alone, as Pulumi runs it with typescript: false', async () => {
    // Vitest compiles TypeScript itself; this checks the modules need nothing but Node 24.
    // (index.ts is left out: outside the engine it would try to reach a Pulumi monitor.)
    const modules = ['../../infra/plan.ts', '../../infra/hookgate.ts'].map((m) =>
      fileURLToPath(new URL(m, import.meta.url)),
    );
    const script = modules.map((m) => `await import(${JSON.stringify(m)});`).join('');
    const result = await new Promise<{ code: number; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        ['--input-type=module', '-e', script],
        { timeout: 15_000 },
        (err, _stdout, stderr) =>
          resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stderr }),
      );
    });
    expect(result, result.stderr).toEqual({ code: 0, stderr: '' });
  });
});
