// Tables as kubectl prints them: upper-case headers, columns padded with three spaces,
// `<none>` for an empty cell; and ages as kubectl writes them (5s, 3m, 2h, 4d).

export function table(headers: string[], rows: string[][]): string {
  const cells = [headers, ...rows.map((r) => r.map((c) => (c === '' ? '<none>' : c)))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
        .join('   ')
        .trimEnd(),
    )
    .join('\n');
}

export function age(timestamp: string | undefined, now = Date.now()): string {
  if (!timestamp) return '';
  const seconds = Math.max(0, Math.floor((now - Date.parse(timestamp)) / 1000));
  if (Number.isNaN(seconds)) return '';
  if (seconds < 120) return `${seconds}s`;
  if (seconds < 7200) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 172800) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86400)}d`;
}
