// `npm run gen`: write crds/*.yaml and the Helm chart's CRD templates from the TypeBox API.
// A test regenerates in memory and fails when the checked-in files are stale.
import { writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderCrdFiles } from './render-crds.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
for (const [path, content] of Object.entries(renderCrdFiles())) {
  mkdirSync(dirname(join(root, path)), { recursive: true });
  writeFileSync(join(root, path), content);
  console.log(`wrote ${path}`);
}
