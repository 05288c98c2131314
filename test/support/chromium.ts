// Debian's headless Chromium for browser tests (never a downloaded browser): where it
// is, the flags that work as root without a network, and whether to skip (loudly) or,
// under CI=true, fail when it is missing.
import { existsSync } from 'node:fs';

export const CHROMIUM = process.env.CHROMIUM_BIN ?? '/usr/bin/chromium';
export const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** True when the browser tests should be skipped (missing Chromium, not in CI). */
export function skipBrowserTests(): boolean {
  const skip = !existsSync(CHROMIUM) && process.env.CI !== 'true';
  if (skip) console.warn(`\n*** SKIPPING browser tests: ${CHROMIUM} not found ***\n`);
  return skip;
}
