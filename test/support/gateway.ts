// A dev runtime over a temporary manifest directory, for gateway tests.
import type { DirectorySource } from '../../operator/sources/directory.ts';
import { createDevRuntime, type DevOptions, type DevRuntime } from '../../roles/dev.ts';
import { eventually } from './eventually.ts';
import { manifestDir } from './manifests.ts';

export interface TestRuntime extends DevRuntime {
  files: Awaited<ReturnType<typeof manifestDir>>;
  /** Write manifests and wait until the named triggers are Ready. */
  apply(file: string, docs: object[], readyTriggers?: string[]): Promise<void>;
  stop(): Promise<void>;
}

export async function startRuntime(options: Partial<DevOptions> = {}): Promise<TestRuntime> {
  const files = await manifestDir();
  const runtime = await createDevRuntime({
    dir: files.dir,
    baseUrl: 'http://localhost',
    ...options,
  });
  return {
    ...runtime,
    files,
    async apply(file, docs, readyTriggers = []) {
      await files.write(file, ...docs);
      await (runtime.source as DirectorySource).reload();
      await eventually(() => {
        for (const name of readyTriggers) {
          const t = runtime.source.get({ kind: 'WebhookTrigger', namespace: 'default', name });
          const ready = (
            t?.status as { conditions?: { type: string; status: string }[] } | undefined
          )?.conditions?.find((c) => c.type === 'Ready');
          if (ready?.status !== 'True')
            throw new Error(`trigger ${name} not Ready: ${JSON.stringify(t?.status)}`);
        }
        const routes = runtime.table.size;
        if (readyTriggers.length > routes) throw new Error('route table not refreshed');
      });
      await runtime.table.refresh();
    },
    async stop() {
      // Every test is done: cut the test clients' idle keep-alive sockets, which would
      // otherwise hold the graceful close open.
      const closing = runtime.close();
      runtime.app.server.closeAllConnections();
      runtime.admin.server.closeAllConnections();
      await closing;
      await files.cleanup();
    },
  };
}
