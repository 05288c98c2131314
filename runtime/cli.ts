#!/usr/bin/env node
// hookgate: one image, several roles. `hookgate dev` (what `npm start` runs) runs
// every role in one process over a manifest directory with in-memory stores.
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { createDevRuntime } from './roles/dev.ts';
import { serve } from './server.ts';

const USAGE = `Usage: hookgate <role> [options]

Roles:
  dev        every role in one process: manifests from a directory, in-memory stores

Options (dev):
  --dir <path>       manifest directory (env HOOKGATE_MANIFESTS, default ./examples)
  --port <n>         listen port (env PORT, default 8080)
  --host <addr>      listen address (env HOST, default 127.0.0.1)
  --base-url <url>   public base URL for status.url (env HOOKGATE_BASE_URL,
                     default http://localhost:<port>)

Environment:
  HOOKGATE_TRUSTED_PROXIES   comma-separated CIDRs whose X-Forwarded-Proto is trusted
  LOG_LEVEL                  fatal | error | warn | info | debug (default info)
`;

async function main(): Promise<void> {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: {
      dir: { type: 'string' },
      port: { type: 'string' },
      host: { type: 'string' },
      'base-url': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const role = positionals[0] ?? 'dev';
  if (values.help) {
    console.log(USAGE);
    return;
  }
  if (role !== 'dev') {
    console.error(`hookgate: unknown role "${role}"\n\n${USAGE}`);
    process.exitCode = 2;
    return;
  }
  const port = Number(values.port ?? process.env.PORT ?? 8080);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`hookgate: invalid port "${values.port ?? process.env.PORT}"`);
    process.exitCode = 2;
    return;
  }
  const host = values.host ?? process.env.HOST ?? '127.0.0.1';
  const dir = resolve(values.dir ?? process.env.HOOKGATE_MANIFESTS ?? 'examples');
  const baseUrl = values['base-url'] ?? process.env.HOOKGATE_BASE_URL ?? `http://localhost:${port}`;
  const trustedProxies = (process.env.HOOKGATE_TRUSTED_PROXIES ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const runtime = await createDevRuntime({
    dir,
    baseUrl,
    logger: { level: process.env.LOG_LEVEL ?? 'info' },
    guards: { trustedProxies },
  });
  const address = await serve(runtime.app, { port, host, onClose: () => runtime.close() });
  runtime.app.log.info(
    `hookgate dev: manifests from ${dir}, serving at ${address}, dashboard at ${baseUrl}/dashboard`,
  );
  for (const e of runtime.source.errors()) runtime.app.log.warn(e, 'manifest rejected');
}

main().catch((err: unknown) => {
  console.error('hookgate: failed to start:', err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
