import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { tuneV8ForServing } from '../../roles/v8-tuning.ts';

describe('tuneV8ForServing (ADR 0024)', () => {
  it('turns allocation-site pretenuring off', () => {
    expect(tuneV8ForServing([])).toEqual(['--no-allocation-site-pretenuring']);
  });

  it('leaves pretenuring alone when the node command line chose', () => {
    expect(tuneV8ForServing(['--allocation-site-pretenuring'])).toEqual([]);
    expect(tuneV8ForServing(['--no-allocation-site-pretenuring'])).toEqual([]);
  });

  it("is a flag this Node's V8 knows (setFlagsFromString would ignore an unknown one)", () => {
    const known = spawnSync(process.execPath, ['--no-allocation-site-pretenuring', '-e', '0']);
    expect(known.status).toBe(0);
    // The check can fail: an unknown V8 flag is refused on the command line.
    const unknown = spawnSync(process.execPath, ['--no-hookgate-unknown-flag', '-e', '0']);
    expect(unknown.status).not.toBe(0);
  });
});
