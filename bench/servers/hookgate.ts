// The hookgate embedded runtime as `npm start` runs it, over the bench manifests:
// API key auth, a rate limit too high to trip, an input schema, metrics on.
import { join } from 'node:path';
import { createDevRuntime } from '../../roles/dev.ts';

const runtime = await createDevRuntime({
  dir: join(import.meta.dirname, 'manifests'),
  baseUrl: 'http://127.0.0.1',
});
// Wait until the reconcile loop has deployed both bench routes.
for (let i = 0; i < 200 && runtime.table.size < 2; i++) await new Promise((r) => setTimeout(r, 25));
if (runtime.table.size < 2) throw new Error('bench routes did not deploy');
const address = await runtime.app.listen({ port: 0, host: '127.0.0.1' });
console.log(`READY ${new URL(address).port}`);
process.on('SIGTERM', () => void runtime.close().then(() => process.exit(0)));
