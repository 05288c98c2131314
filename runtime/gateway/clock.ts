// ISO 8601 timestamps on the request path: the runtime's one helper, in ../time.ts.
export { isoTime } from '../time.ts';
