// ISO 8601 timestamps on the request path. Date#toISOString costs more than all the
// rest of building a trigger output; under load several requests share each
// millisecond, so the text of the last millisecond asked for is kept.
let lastMs = Number.NaN;
let lastText = '';

/** `new Date(ms).toISOString()`, computed once per distinct millisecond in a row. */
export function isoTime(ms: number): string {
  if (ms !== lastMs) {
    lastText = new Date(ms).toISOString();
    lastMs = ms;
  }
  return lastText;
}
