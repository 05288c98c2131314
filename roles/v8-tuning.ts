// V8 settings of the roles that serve webhooks (dev, gateway), applied from inside the
// process so that every way of starting one gets them (`npm start`, the image's
// entrypoint, a chart's `command`, `npx hookgate`): V8 refuses these flags in
// NODE_OPTIONS. ADR 0024 gives the measurements.
//
// Allocation-site pretenuring off: V8 decides, per allocation site, to allocate
// straight in the old generation objects it saw survive young collections. On the
// request path that includes objects which live a few milliseconds to a few seconds
// (execution records kept by the memory store, requests in flight at a scavenge): they
// then die in the old generation, and every young object stored into them goes through
// the write barrier's slow path. With it off (bench/README.md, in-run comparisons,
// medians of 5): the embedded server -6 to -32 % CPU per request (the size moves with
// the machine's load), the gateway role -1 to -11 %.
import { setFlagsFromString } from 'node:v8';

const PRETENURING = 'allocation-site-pretenuring';

/**
 * Applies the serving roles' V8 settings, unless the node command line already says
 * how to pretenure (`node --allocation-site-pretenuring roles/cli.ts ...` keeps V8's
 * default). Returns the flags applied.
 */
export function tuneV8ForServing(execArgv: readonly string[] = process.execArgv): string[] {
  if (execArgv.some((arg) => arg.includes(PRETENURING))) return [];
  const flag = `--no-${PRETENURING}`;
  setFlagsFromString(flag);
  return [flag];
}
