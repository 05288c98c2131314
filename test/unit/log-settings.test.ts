// How log lines wait for stdout, from the environment (roles/log-settings.ts): the
// destination's defaults when unset, sizes with units, and a problem naming the
// variable and its bounds for anything outside them (the role then exits 2).
import { describe, expect, it } from 'vitest';
import { LOG_BUFFER_BYTES, LOG_STALL_MS, LOG_SYNC_FLUSH_MS } from '../../roles/log-destination.ts';
import { logOutputSettings } from '../../roles/log-settings.ts';

describe('log output settings', () => {
  it("defaults to the destination's constants", () => {
    expect(logOutputSettings({})).toEqual({
      settings: {
        maxBufferedBytes: LOG_BUFFER_BYTES,
        stallMs: LOG_STALL_MS,
        syncFlushMs: LOG_SYNC_FLUSH_MS,
      },
      problems: [],
    });
    expect([LOG_BUFFER_BYTES, LOG_STALL_MS, LOG_SYNC_FLUSH_MS]).toEqual([
      4 * 1024 ** 2,
      5000,
      1000,
    ]);
  });

  it('reads sizes with a unit and whole milliseconds, the bounds included', () => {
    const read = (env: NodeJS.ProcessEnv) => logOutputSettings(env);
    expect(
      read({
        HOOKGATE_LOG_BUFFER_BYTES: '64Ki',
        HOOKGATE_LOG_STALL_MS: '100',
        HOOKGATE_LOG_SYNC_FLUSH_MS: '0',
      }),
    ).toEqual({
      settings: { maxBufferedBytes: 65_536, stallMs: 100, syncFlushMs: 0 },
      problems: [],
    });
    expect(
      read({
        HOOKGATE_LOG_BUFFER_BYTES: '67108864',
        HOOKGATE_LOG_STALL_MS: '20000',
        HOOKGATE_LOG_SYNC_FLUSH_MS: '4000',
      }).settings,
    ).toEqual({ maxBufferedBytes: 64 * 1024 ** 2, stallMs: 20_000, syncFlushMs: 4000 });
    expect(read({ HOOKGATE_LOG_BUFFER_BYTES: '16MiB' }).settings.maxBufferedBytes).toBe(
      16 * 1024 ** 2,
    );
  });

  it.each([
    ['HOOKGATE_LOG_BUFFER_BYTES', '65535', 'a size from 64Ki to 64Mi (e.g. 4Mi)'],
    ['HOOKGATE_LOG_BUFFER_BYTES', '65Mi', 'a size from 64Ki to 64Mi (e.g. 4Mi)'],
    ['HOOKGATE_LOG_BUFFER_BYTES', '4 megs', 'a size from 64Ki to 64Mi (e.g. 4Mi)'],
    ['HOOKGATE_LOG_STALL_MS', '99', 'an integer from 100 to 20000'],
    ['HOOKGATE_LOG_STALL_MS', '20001', 'an integer from 100 to 20000'],
    ['HOOKGATE_LOG_STALL_MS', '5s', 'an integer from 100 to 20000'],
    ['HOOKGATE_LOG_STALL_MS', '', 'an integer from 100 to 20000'],
    ['HOOKGATE_LOG_SYNC_FLUSH_MS', '-1', 'an integer from 0 to 4000'],
    ['HOOKGATE_LOG_SYNC_FLUSH_MS', '4001', 'an integer from 0 to 4000'],
    ['HOOKGATE_LOG_SYNC_FLUSH_MS', '1e3', 'an integer from 0 to 4000'],
    ['HOOKGATE_LOG_SYNC_FLUSH_MS', '0.5', 'an integer from 0 to 4000'],
  ])('%s=%j is refused: must be %s', (name, raw, what) => {
    const { settings, problems } = logOutputSettings({ [name]: raw });
    expect(problems).toEqual([`${name} must be ${what}, not "${raw}"`]);
    // The rest keep their defaults.
    expect(settings.syncFlushMs + settings.stallMs).toBeGreaterThan(0);
  });
});
