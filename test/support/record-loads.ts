// Preloaded with `node --import` by tests: appends the URL of every module the process
// resolves to the file in HOOKGATE_TEST_LOADS (which modules a role loads, and which not).
import { appendFileSync } from 'node:fs';
import { registerHooks } from 'node:module';

const out = process.env.HOOKGATE_TEST_LOADS;
if (out) {
  registerHooks({
    resolve(specifier, context, next) {
      const resolved = next(specifier, context);
      appendFileSync(out, `${resolved.url}\n`);
      return resolved;
    },
  });
}
