// HOOKGATE_ANALYTICS and HOOKGATE_PROMETHEUS_*: the analytics backend a role reads
// from, checked before anything starts (bad values exit 2 with a clear message).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { analyticsSettings } from '../../roles/analytics-settings.ts';

const dir = mkdtempSync(join(tmpdir(), 'hookgate-analytics-settings-'));
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};
const PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

describe('analytics settings', () => {
  it('default: memory; prometheus as soon as a URL is given', () => {
    expect(analyticsSettings({}).config).toEqual({ kind: 'memory' });
    expect(analyticsSettings({ HOOKGATE_PROMETHEUS_URL: 'http://p:9090' }).config).toEqual({
      kind: 'prometheus',
      url: 'http://p:9090',
    });
    expect(
      analyticsSettings({ HOOKGATE_ANALYTICS: 'memory', HOOKGATE_PROMETHEUS_URL: 'http://p:9090' })
        .config,
    ).toEqual({ kind: 'memory' });
  });

  it('bearer token from a file, CA bundle, timeout and selector', () => {
    const s = analyticsSettings({
      HOOKGATE_ANALYTICS: 'prometheus',
      HOOKGATE_PROMETHEUS_URL: 'https://p:9090',
      HOOKGATE_PROMETHEUS_TOKEN_FILE: file('token', 'abc\n'),
      HOOKGATE_PROMETHEUS_CA_FILE: file('ca.pem', PEM),
      HOOKGATE_PROMETHEUS_TIMEOUT_MS: '2500',
      HOOKGATE_PROMETHEUS_SELECTOR: 'job="hookgate"',
    });
    expect(s.config).toEqual({
      kind: 'prometheus',
      url: 'https://p:9090',
      selector: 'job="hookgate"',
      timeoutMs: 2500,
      headers: { authorization: 'Bearer abc' },
      ca: PEM.trim(),
    });
  });

  it('basic auth', () => {
    const s = analyticsSettings({
      HOOKGATE_PROMETHEUS_URL: 'http://p:9090',
      HOOKGATE_PROMETHEUS_USERNAME: 'reader',
      HOOKGATE_PROMETHEUS_PASSWORD_FILE: file('password', 'secret'),
    });
    expect(s.config).toMatchObject({
      headers: { authorization: `Basic ${Buffer.from('reader:secret').toString('base64')}` },
    });
  });

  it.each([
    [{ HOOKGATE_ANALYTICS: 'redis' }, 'HOOKGATE_ANALYTICS must be memory or prometheus'],
    [{ HOOKGATE_ANALYTICS: 'prometheus' }, 'needs HOOKGATE_PROMETHEUS_URL'],
    [{ HOOKGATE_PROMETHEUS_URL: 'prometheus:9090' }, 'must be an http(s) URL'],
    [
      { HOOKGATE_PROMETHEUS_URL: 'http://p', HOOKGATE_PROMETHEUS_TIMEOUT_MS: '5s' },
      'HOOKGATE_PROMETHEUS_TIMEOUT_MS must be an integer of at least 100',
    ],
    [
      { HOOKGATE_PROMETHEUS_URL: 'http://p', HOOKGATE_PROMETHEUS_TOKEN_FILE: '/nonexistent/t' },
      'HOOKGATE_PROMETHEUS_TOKEN_FILE /nonexistent/t cannot be read (ENOENT)',
    ],
    [
      { HOOKGATE_PROMETHEUS_URL: 'http://p', HOOKGATE_PROMETHEUS_TOKEN_FILE: file('empty', '') },
      'is empty',
    ],
    [
      { HOOKGATE_PROMETHEUS_URL: 'http://p', HOOKGATE_PROMETHEUS_USERNAME: 'u' },
      'HOOKGATE_PROMETHEUS_USERNAME and HOOKGATE_PROMETHEUS_PASSWORD_FILE go together',
    ],
    [
      {
        HOOKGATE_PROMETHEUS_URL: 'http://p',
        HOOKGATE_PROMETHEUS_TOKEN_FILE: file('t2', 'x'),
        HOOKGATE_PROMETHEUS_USERNAME: 'u',
        HOOKGATE_PROMETHEUS_PASSWORD_FILE: file('p2', 'y'),
      },
      'exclude each other',
    ],
    [
      { HOOKGATE_PROMETHEUS_URL: 'https://p', HOOKGATE_PROMETHEUS_CA_FILE: file('ca2', 'nope') },
      'holds no PEM certificate',
    ],
  ])('%j → %s', (env, message) => {
    const s = analyticsSettings(env);
    expect(s.config).toBeUndefined();
    expect(s.problems.join('; ')).toContain(message);
  });

  it('the command line exits 2 with the message before connecting to anything', () => {
    const clean = { ...process.env };
    for (const name of Object.keys(clean)) if (name.startsWith('HOOKGATE_')) delete clean[name];
    const result = spawnSync(
      process.execPath,
      [join(import.meta.dirname, '..', '..', 'roles', 'cli.ts'), 'gateway'],
      {
        encoding: 'utf8',
        env: { ...clean, REDIS_URL: 'redis://127.0.0.1:1', HOOKGATE_ANALYTICS: 'prometheus' },
        timeout: 20_000,
      },
    );
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('HOOKGATE_ANALYTICS=prometheus needs HOOKGATE_PROMETHEUS_URL');
    expect(result.stderr).toContain('HOOKGATE_PROMETHEUS_TOKEN_FILE');
  });
});
