// Where the analytics API reads its figures: the in-process store (one process) or
// Prometheus (every gateway replica scraped). Checked with the other settings before
// anything starts; a bad value exits 2 with a clear message (settings.ts).
import { readFileSync } from 'node:fs';
import type { AnalyticsBackendConfig } from '../runtime/analytics/wiring.ts';

export const ANALYTICS_USAGE = `  HOOKGATE_ANALYTICS         memory | prometheus: where /api/analytics reads from
                             (default prometheus when HOOKGATE_PROMETHEUS_URL is set,
                             else memory; memory sees only its own process)
  HOOKGATE_PROMETHEUS_URL    Prometheus base URL, e.g. http://prometheus.monitoring:9090
  HOOKGATE_PROMETHEUS_SELECTOR  label matchers added to every query, e.g. job="hookgate"
  HOOKGATE_PROMETHEUS_TOKEN_FILE  file holding a bearer token for Prometheus
  HOOKGATE_PROMETHEUS_USERNAME, HOOKGATE_PROMETHEUS_PASSWORD_FILE  basic auth instead
  HOOKGATE_PROMETHEUS_CA_FILE  PEM CA bundle to trust for an https URL
  HOOKGATE_PROMETHEUS_TIMEOUT_MS  per query (default 10000); slower answers are a 504
`;

const KINDS = ['memory', 'prometheus'] as const;

/** The analytics backend from the environment, or the problems with it. */
export function analyticsSettings(
  env: NodeJS.ProcessEnv = process.env,
): { config: AnalyticsBackendConfig; problems: [] } | { config?: never; problems: string[] } {
  const problems: string[] = [];
  const url = env.HOOKGATE_PROMETHEUS_URL;
  const kind = env.HOOKGATE_ANALYTICS ?? (url ? 'prometheus' : 'memory');
  if (!(KINDS as readonly string[]).includes(kind)) {
    return { problems: [`HOOKGATE_ANALYTICS must be memory or prometheus, not "${kind}"`] };
  }
  if (kind === 'memory') return { config: { kind: 'memory' }, problems: [] };
  if (!url) return { problems: ['HOOKGATE_ANALYTICS=prometheus needs HOOKGATE_PROMETHEUS_URL'] };
  if (!isHttpUrl(url))
    problems.push(`HOOKGATE_PROMETHEUS_URL must be an http(s) URL, not "${url}"`);
  const timeout = env.HOOKGATE_PROMETHEUS_TIMEOUT_MS;
  if (timeout !== undefined && !(Number.isInteger(Number(timeout)) && Number(timeout) >= 100))
    problems.push(
      `HOOKGATE_PROMETHEUS_TIMEOUT_MS must be an integer of at least 100, not "${timeout}"`,
    );
  const headers = authHeaders(env, problems);
  const caFile = env.HOOKGATE_PROMETHEUS_CA_FILE;
  const ca = caFile ? readSecret('HOOKGATE_PROMETHEUS_CA_FILE', caFile, problems) : undefined;
  if (ca !== undefined && !ca.includes('-----BEGIN CERTIFICATE-----'))
    problems.push(`HOOKGATE_PROMETHEUS_CA_FILE ${caFile} holds no PEM certificate`);
  if (problems.length > 0) return { problems };
  const selector = env.HOOKGATE_PROMETHEUS_SELECTOR;
  return {
    config: {
      kind: 'prometheus',
      url: url,
      ...(selector ? { selector } : {}),
      ...(timeout ? { timeoutMs: Number(timeout) } : {}),
      ...(Object.keys(headers).length > 0 ? { headers } : {}),
      ...(ca ? { ca } : {}),
    },
    problems: [],
  };
}

/** The Authorization header: a bearer token from a file, or basic auth. */
function authHeaders(env: NodeJS.ProcessEnv, problems: string[]): Record<string, string> {
  const headers: Record<string, string> = {};
  const tokenFile = env.HOOKGATE_PROMETHEUS_TOKEN_FILE;
  const username = env.HOOKGATE_PROMETHEUS_USERNAME;
  const passwordFile = env.HOOKGATE_PROMETHEUS_PASSWORD_FILE;
  if (tokenFile && (username || passwordFile))
    problems.push('HOOKGATE_PROMETHEUS_TOKEN_FILE and basic auth exclude each other');
  if (tokenFile) {
    const token = readSecret('HOOKGATE_PROMETHEUS_TOKEN_FILE', tokenFile, problems);
    if (token) headers.authorization = `Bearer ${token}`;
  }
  if (Boolean(username) !== Boolean(passwordFile))
    problems.push('HOOKGATE_PROMETHEUS_USERNAME and HOOKGATE_PROMETHEUS_PASSWORD_FILE go together');
  else if (username && passwordFile) {
    const password = readSecret('HOOKGATE_PROMETHEUS_PASSWORD_FILE', passwordFile, problems);
    if (password)
      headers.authorization = `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
  }
  return headers;
}

function isHttpUrl(raw: string): boolean {
  try {
    const u = new URL(raw);
    return u.protocol === 'http:' || u.protocol === 'https:';
  } catch {
    return false;
  }
}

/** A file's trimmed content; a problem when it cannot be read or is empty. */
function readSecret(name: string, path: string, problems: string[]): string | undefined {
  try {
    const text = readFileSync(path, 'utf8').trim();
    if (text === '') problems.push(`${name} ${path} is empty`);
    return text || undefined;
  } catch (err) {
    problems.push(
      `${name} ${path} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
    );
    return undefined;
  }
}
