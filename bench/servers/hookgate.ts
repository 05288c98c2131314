// The hookgate embedded runtime as `npm start` runs it, over the bench manifests:
// API key auth, a rate limit too high to trip, an input schema, metrics on.
import { join } from 'node:path';
import { createDevRuntime } from '../../roles/dev.ts';
import { ready, waitForRoutes } from './routes.ts';
import { tuneV8ForServing } from '../../roles/v8-tuning.ts';

// As roles/cli.ts starts the role.
tuneV8ForServing();
const runtime = await createDevRuntime({
  dir: join(import.meta.dirname, 'manifests'),
  baseUrl: 'http://127.0.0.1',
});
await waitForRoutes(runtime.table);
const address = await runtime.app.listen({ port: 0, host: '127.0.0.1' });
ready(address);
process.on('SIGTERM', () => void runtime.close().then(() => process.exit(0)));
