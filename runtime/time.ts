// ISO 8601 timestamps, for the gateway and the engine alike. Date#toISOString costs
// about as much as building a trigger output or an execution event; a request stamps
// its trigger output and headers, an execution its record, log lines and events about
// ten times, mostly within the same millisecond as the stamp before: the text of the
// last millisecond asked for is kept.
let lastMs = Number.NaN;
let lastText = '';

/** `new Date(ms).toISOString()`, computed once per distinct millisecond in a row. */
export function isoTime(ms: number = Date.now()): string {
  if (ms !== lastMs) {
    lastText = new Date(ms).toISOString();
    lastMs = ms;
  }
  return lastText;
}
