// The engine's output check for a route: the compiled output side of spec.schema, as
// the engine wants it. The gateway (in-process runs) and the worker (queued runs) use
// the same one, through two caches, neither of which grows with the routes ever seen:
// - by route record (a WeakMap): the gateway's route table keeps one record object per
//   route version, so the check is built once, from the same compiled schemas as the
//   input check (schemasFor), and goes when the table drops the record;
// - by route key and generation, for the MAX_RECENT_ROUTES routes used last: the worker
//   reads a fresh record for every job, and compiling a schema costs milliseconds.
import type { OutputValidator } from './ports.ts';
import { schemasFor } from '../gateway/body/schemas.ts';
import type { RouteRecord } from '../../api/records/records.ts';

/** Routes whose output check is kept by key and generation (least recently used go first). */
export const MAX_RECENT_ROUTES = 256;

/** `null`: the route has no output schema. */
const byRecord = new WeakMap<RouteRecord, OutputValidator | null>();
const recent = new Map<string, { generation: number; validator: OutputValidator | null }>();

export function outputValidatorFor(route: RouteRecord): OutputValidator | undefined {
  let validator = byRecord.get(route);
  if (validator === undefined) {
    validator = recentValidator(route);
    byRecord.set(route, validator);
  }
  return validator ?? undefined;
}

function recentValidator(route: RouteRecord): OutputValidator | null {
  const hit = recent.get(route.key);
  recent.delete(route.key);
  const entry =
    hit?.generation === route.generation
      ? hit
      : { generation: route.generation, validator: buildValidator(route) };
  recent.set(route.key, entry);
  if (recent.size > MAX_RECENT_ROUTES) {
    const oldest = recent.keys().next();
    if (!oldest.done) recent.delete(oldest.value);
  }
  return entry.validator;
}

function buildValidator(route: RouteRecord): OutputValidator | null {
  const validate = schemasFor(route).output;
  if (!validate) return null;
  return (output) => {
    const problems = validate(output);
    if (problems.length === 0) return { ok: true };
    return { ok: false, errors: problems.map((p) => `${p.pointer || '/'} ${p.detail}`) };
  };
}
