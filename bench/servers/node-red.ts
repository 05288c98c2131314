// The peer: Node-RED with the minimal webhook flow (http in → change → http response
// 202), embedded in this process the way Node-RED's docs show, so that this process's
// CPU is Node-RED's. Node-RED is not a dependency of hookgate: it is installed on first
// use into the ignored .cache/bench/node-red (like kubectl and helm for the tests).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const VERSION = process.env.BENCH_NODE_RED_VERSION ?? '5.0.7';
const dir = join(import.meta.dirname, '..', '..', '.cache', 'bench', `node-red-${VERSION}`);
const manifest = join(dir, 'node_modules', 'node-red', 'package.json');
if (!existsSync(manifest)) {
  const npm = spawnSync(
    'npm',
    [
      'install',
      '--prefix',
      dir,
      '--no-audit',
      '--no-fund',
      '--omit=optional',
      `node-red@${VERSION}`,
    ],
    { stdio: ['ignore', process.stderr, process.stderr] },
  );
  if (npm.status !== 0) throw new Error(`npm install node-red@${VERSION} failed`);
}

interface NodeRed {
  init(server: unknown, settings: Record<string, unknown>): void;
  start(): Promise<void>;
  stop(): Promise<void>;
  httpNode: (req: unknown, res: unknown, next: () => void) => void;
}
const requireFromNodeRed = createRequire(manifest);
const RED = requireFromNodeRed('node-red') as NodeRed;

const path = '/webhook/x/ack';
const flows = [
  { id: 'bench', type: 'tab', label: 'bench' },
  { id: 'in', type: 'http in', z: 'bench', url: path, method: 'post', wires: [['shape']] },
  {
    id: 'shape',
    type: 'change',
    z: 'bench',
    rules: [
      {
        t: 'set',
        p: 'payload',
        pt: 'msg',
        to: '{ "orderId": payload.orderId, "total": payload.total }',
        tot: 'jsonata',
      },
    ],
    wires: [['out']],
  },
  { id: 'out', type: 'http response', z: 'bench', statusCode: '202', headers: {}, wires: [] },
];
const userDir = mkdtempSync(join(tmpdir(), 'bench-node-red-'));
writeFileSync(join(userDir, 'flows.json'), JSON.stringify(flows));

const server = createServer((req, res) =>
  RED.httpNode(req, res, () => {
    res.statusCode = 404;
    res.end();
  }),
);
RED.init(server, {
  userDir,
  flowFile: 'flows.json',
  httpAdminRoot: false,
  httpNodeRoot: '/',
  credentialSecret: false,
  logging: { console: { level: 'warn', metrics: false, audit: false } },
});
await RED.start();
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const { port } = server.address() as { port: number };
// Flows start after the runtime: wait until the endpoint answers.
for (let i = 0; ; i++) {
  const answer = await fetch(`http://127.0.0.1:${port}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"orderId":"A-1","total":1}',
  }).catch(() => undefined);
  if (answer?.status === 202) break;
  if (i > 200) throw new Error(`Node-RED flow did not start (last status ${answer?.status})`);
  await new Promise((r) => setTimeout(r, 50));
}
console.log(`READY ${port} ${JSON.stringify({ minimal: path })}`);
process.on('SIGTERM', () => {
  setTimeout(() => process.exit(0), 2_000).unref();
  void RED.stop().finally(() => process.exit(0));
});
