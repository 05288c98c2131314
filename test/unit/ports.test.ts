// The test suites' free ports (test/support/ports.ts): never the same one twice in a
// process, since two picks made before either process binds could otherwise collide.
import { describe, expect, it } from 'vitest';
import { freePort, freePortRun, freePorts } from '../support/ports.ts';

describe('free ports for test processes', () => {
  it('never hands out a port twice in one process', async () => {
    const ports: number[] = [];
    // 500 random picks from ~22,000 ports collide at least once ~99 % of the time
    // (the birthday bound) without the bookkeeping.
    for (let i = 0; i < 250; i++) ports.push(await freePort());
    ports.push(...(await freePorts(200)));
    const base = await freePortRun(50);
    ports.push(...Array.from({ length: 50 }, (_, i) => base + i));
    expect(ports).toHaveLength(500);
    expect(new Set(ports).size).toBe(500);
  });
});
