// Responses are recorded where the output check runs: the engine calls the route's
// output validator with the workflow's final output, in the gateway (inline
// executions) and in workers (queued ones) alike. For a route that learns, the check is
// wrapped: the output is recorded when it passes (or when there is no check yet).
import type { RouteRecord } from '../../api/records/records.ts';
import { isLearning } from '../../api/schemas.ts';
import type { OutputValidator } from '../engine/ports.ts';
import type { SampleRecorder } from './recorder.ts';

export type OutputValidatorFor = (route: RouteRecord) => OutputValidator | undefined;

export function learningOutputValidator(
  recorder: SampleRecorder,
  base: OutputValidatorFor,
): OutputValidatorFor {
  return (route) => {
    const check = base(route);
    if (!isLearning(route.spec.schema)) return check;
    return (output) => {
      const verdict = check ? check(output) : ({ ok: true } as const);
      if (verdict.ok) recorder.response(route, output);
      return verdict;
    };
  };
}
