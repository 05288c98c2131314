// JSONata's limits hold against a hostile expression or input: what runs inside one
// synchronous step, out of reach of JSONata's time limit, is bounded too.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { caseless } from '../../api/linear-regex.ts';
import { ExpressionCache } from '../../runtime/engine/expressions.ts';

const bindings = { trigger: {}, nodes: {} };

describe('regular expressions', () => {
  it('a catastrophic backtracking pattern on a short input answers at once', async () => {
    const cache = new ExpressionCache({ timeoutMs: 1000 });
    const input = { text: `${'a'.repeat(5000)}!` };
    const started = performance.now();
    await expect(
      cache.evaluate('w@1', '$match(text, /(a+)+$/)', input, bindings),
    ).resolves.toBeUndefined();
    await expect(
      cache.evaluate('w@1', '$contains(text, /(a|aa)*!$/)', input, bindings),
    ).resolves.toBe(true);
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('a pattern given to $eval from the input runs on the same engine', async () => {
    const cache = new ExpressionCache({ timeoutMs: 1000 });
    const input = { text: `${'a'.repeat(5000)}!`, code: '$match(text, /(a+)+$/)' };
    const started = performance.now();
    await expect(cache.evaluate('w@1', '$eval(code)', input, bindings)).resolves.toBeUndefined();
    expect(performance.now() - started).toBeLessThan(1000);
    await expect(
      cache.evaluate(
        'w@1',
        '$eval(code)',
        { text: 'aa', code: '$match(text, /(a)\\1/)' },
        bindings,
      ),
    ).rejects.toThrow(/linear time/);
  });

  it('a pattern the linear engine cannot run does not compile', () => {
    const cache = new ExpressionCache();
    expect(() => cache.compile('w@1', '$match(body, /(a)\\1/)')).toThrow(
      /invalid expression: regular expression \/\(a\)\\1\/ cannot run in linear time/,
    );
    expect(() => cache.compile('w@1', '$replace(body, /a(?=b)/, "c")')).toThrow(/linear time/);
  });

  it('matches, replaces and splits as before, /i included', async () => {
    const cache = new ExpressionCache();
    const input = { s: 'Order-12, order-34' };
    await expect(
      cache.evaluate('w@1', '[$match(s, /order-([0-9]+)/i).groups[0]]', input, bindings),
    ).resolves.toEqual(['12', '34']);
    await expect(
      cache.evaluate('w@1', '$replace(s, /[0-9]+/, "#")', input, bindings),
    ).resolves.toBe('Order-#, order-#');
    await expect(cache.evaluate('w@1', '$split(s, /,\\s*/)', input, bindings)).resolves.toEqual([
      'Order-12',
      'order-34',
    ]);
    await expect(cache.evaluate('w@1', '$contains(s, /^order/i)', input, bindings)).resolves.toBe(
      true,
    );
  });
});

describe('case-insensitive patterns, rewritten for the linear-time engine', () => {
  it('match what /i matches', () => {
    const text = fc.constantFrom(
      'a',
      'A',
      'b',
      'z',
      'Z',
      'é',
      'É',
      'k',
      'K',
      '\u212a',
      'ſ',
      's',
      'S',
      '-',
      ']',
      '0',
      '_',
    );
    const part = fc.constantFrom(
      'a',
      'B',
      'é',
      'k',
      's',
      '[a-c]',
      '[^a-z]',
      '[A-Z0-9]',
      '[é-ë]',
      '\\x41',
      '.',
      '[\\]a-]',
      '(?:ab|K)',
      'z+',
      '[_-a]',
    );
    fc.assert(
      fc.property(
        fc.array(part, { minLength: 1, maxLength: 4 }),
        fc.array(text, { maxLength: 8 }),
        (parts, chars) => {
          const pattern = parts.join('');
          const s = chars.join('');
          const matches = (re: RegExp) => [...s.matchAll(re)].map((m) => [m.index, m[0]]);
          expect(matches(new RegExp(caseless(pattern), 'g'))).toEqual(
            matches(new RegExp(pattern, 'gi')),
          );
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('read escapes as /i reads them (identity escapes, legacy octal, escaped range ends)', () => {
    // Annex B (no u flag): \N and \k (no named group) are the letters N and k; \101 is
    // 'A'; \12 with fewer groups is octal; [\]-z] is the range ']'..'z' (A-Z under /i);
    // [\b-z] the range backspace..'z' (the Kelvin sign under /i); \x4 is 'x' then '4'.
    // Each one-character pattern against every code unit, the others against some words.
    const oneUnit = [
      '\\N',
      '[\\N]',
      '\\k',
      '\\101',
      '[\\101-\\132]',
      '\\8',
      '[\\]-z]',
      '[\\.-z]',
      '[\\b-z]',
      '[\\B]',
      '[\\t-z]',
      '[\\0-z]',
      '[^\\N]',
    ];
    const units = Array.from({ length: 0x10000 }, (_, u) => String.fromCharCode(u));
    for (const pattern of oneUnit) {
      const caseInsensitive = new RegExp(`^(?:${pattern})$`, 'i');
      const rewritten = new RegExp(`^(?:${caseless(pattern)})$`);
      const differ = units.filter((s) => caseInsensitive.test(s) !== rewritten.test(s));
      expect({ pattern, differ: differ.slice(0, 4) }).toEqual({ pattern, differ: [] });
    }
    const words = ['zp', 'ZP', 'x4', 'X4', 'ue', 'Ue', 'a\n', 'A\n', 'aa', 'Aa'];
    for (const pattern of ['\\Z\\p', '\\x4', '\\u00e', '(a)\\12']) {
      const caseInsensitive = new RegExp(`^(?:${pattern})$`, 'i');
      const rewritten = new RegExp(`^(?:${caseless(pattern)})$`);
      expect({ pattern, matched: words.filter((w) => rewritten.test(w)) }).toEqual({
        pattern,
        matched: words.filter((w) => caseInsensitive.test(w)),
      });
    }
    // Backreferences stay as they are: the linear-time engine refuses them.
    expect(caseless('(a)\\1')).toBe('([\\u0041\\u0061])\\1');
    expect(caseless('(?<n>a)\\k<n>')).toBe('(?<n>[\\u0041\\u0061])\\k<n>');
  });

  it('leave group names, control escapes and class escapes as they are', () => {
    expect(caseless('(?<Name>x)\\cJ\\w')).toBe('(?<Name>[\\u0058\\u0078])\\cJ\\w');
  });
});
