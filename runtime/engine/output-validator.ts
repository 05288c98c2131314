// The engine's output check for a route: the compiled output side of spec.schema, as
// the engine wants it. The gateway (in-process runs) and the worker (queued runs) use
// the same one.
import type { OutputValidator } from './ports.ts';
import { schemasFor } from '../gateway/body/schemas.ts';
import type { RouteRecord } from '../../api/records/records.ts';

export function outputValidatorFor(route: RouteRecord): OutputValidator | undefined {
  const validate = schemasFor(route).output;
  if (!validate) return undefined;
  return (output) => {
    const problems = validate(output);
    if (problems.length === 0) return { ok: true };
    return { ok: false, errors: problems.map((p) => `${p.pointer || '/'} ${p.detail}`) };
  };
}
