// The workflow identifier is injective: no two (namespace, environment, name) triples
// share one, so no tenant can choose names that land on another tenant's URL.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  DNS1123_LABEL_MAX,
  DNS1123_SUBDOMAIN_MAX,
  isNamespaceName,
  isObjectName,
  parseWorkflowIdentifier,
  routePath,
  workflowIdentifier,
} from '../../../api/identity.ts';
import { ENVIRONMENTS } from '../../../api/v1alpha1/index.ts';

/** One DNS-1123 label, biased towards dashes and environment words, to provoke collisions. */
function label(maxLength: number): fc.Arbitrary<string> {
  const piece = fc.oneof(
    fc.constantFrom(...ENVIRONMENTS, 'team', 'x', 'a', '0'),
    fc.stringMatching(/^[a-z0-9]{1,8}$/),
  );
  return fc
    .array(piece, { minLength: 1, maxLength: 6 })
    .map((pieces) => pieces.join('-'))
    .filter((s) => s.length <= maxLength);
}

const namespaceName = label(DNS1123_LABEL_MAX);
const objectName = fc
  .array(label(63), { minLength: 1, maxLength: 4 })
  .map((labels) => labels.join('.'))
  .filter((s) => s.length <= DNS1123_SUBDOMAIN_MAX);
const environment = fc.constantFrom(...ENVIRONMENTS);
const triple = fc.tuple(namespaceName, environment, objectName);
/**
 * Triples built from few words: independent random pairs rarely come close, these
 * give many near misses (the same words split at different places, `-` against `.`).
 */
const pieces = fc.array(fc.constantFrom('team', 'a', 'development', 'staging', 'x'), {
  minLength: 1,
  maxLength: 4,
});
const near = fc.tuple(
  pieces.map((p) => p.join('-')),
  environment,
  fc.tuple(pieces, fc.constantFrom('-', '.')).map(([p, sep]) => p.join(sep)),
);
const anyValid = fc.oneof(triple, near);

describe('workflowIdentifier', () => {
  it('gives the squatting pair two distinct identifiers and URLs', () => {
    const victim = workflowIdentifier('team-development', 'staging', 'x');
    const squatter = workflowIdentifier('team', 'development', 'staging-x');
    expect(victim).toBe('team-development_staging_x');
    expect(squatter).toBe('team_development_staging-x');
    expect(routePath(victim, 'ingest')).not.toBe(routePath(squatter, 'ingest'));
  });

  it('keeps names that differ only in . and - apart (the old slug merged them)', () => {
    expect(workflowIdentifier('shop', 'production', 'orders.v2')).toBe('shop_production_orders.v2');
    expect(workflowIdentifier('shop', 'production', 'orders.v2')).not.toBe(
      workflowIdentifier('shop', 'production', 'orders-v2'),
    );
  });

  it('generated names are valid Kubernetes names (the generator is honest)', () => {
    fc.assert(
      fc.property(anyValid, ([ns, , name]) => isNamespaceName(ns) && isObjectName(name)),
      { numRuns: 500 },
    );
  });

  it('is a single path segment of unreserved URL characters for valid names', () => {
    fc.assert(
      fc.property(anyValid, ([ns, env, name]) => {
        expect(workflowIdentifier(ns, env, name)).toMatch(/^[a-z0-9._-]+$/);
      }),
      { numRuns: 500 },
    );
  });

  it('decodes back to its triple, for valid names and for any strings at all', () => {
    const anyTriple = fc.tuple(fc.string(), fc.string(), fc.string({ unit: 'binary' }));
    fc.assert(
      fc.property(fc.oneof(anyValid, anyTriple), ([namespace, env, name]) => {
        const id = workflowIdentifier(namespace, env, name);
        expect(parseWorkflowIdentifier(id)).toEqual({ namespace, environment: env, name });
        expect(id).not.toMatch(/[/:?#%\s]/);
      }),
      { numRuns: 2000 },
    );
  });

  it('no two distinct random triples share an identifier', () => {
    fc.assert(
      fc.property(anyValid, anyValid, (a, b) => {
        const same = a[0] === b[0] && a[1] === b[1] && a[2] === b[2];
        const idA = workflowIdentifier(...a);
        const idB = workflowIdentifier(...b);
        expect(idA === idB).toBe(same);
      }),
      { numRuns: 5000 },
    );
  });

  it('no triple shares an identifier with the triples its dash-joined words re-split into', () => {
    // Every way of reading `<namespace>-<environment>-<name>` back as a triple: exactly
    // the triples the old `-` join could not tell apart.
    const resplits = ([ns, env, name]: [string, string, string]) => {
      const words = `${ns}-${env}-${name}`.split('-');
      const out: [string, string, string][] = [];
      for (let i = 1; i < words.length - 1; i++) {
        const e = words[i] as string;
        if (!(ENVIRONMENTS as readonly string[]).includes(e)) continue;
        out.push([words.slice(0, i).join('-'), e, words.slice(i + 1).join('-')]);
      }
      return out.filter(([n, , m]) => isNamespaceName(n) && isObjectName(m));
    };
    let rivals = 0;
    fc.assert(
      fc.property(anyValid, (a) => {
        for (const b of resplits(a)) {
          const same = a.join('/') === b.join('/');
          if (!same) rivals++;
          expect(workflowIdentifier(...a) === workflowIdentifier(...b)).toBe(same);
        }
      }),
      { numRuns: 2000 },
    );
    expect(rivals).toBeGreaterThan(100);
  });

  it('no collision in a large batch of triples built from shared pieces', () => {
    fc.assert(
      fc.property(fc.array(near, { minLength: 50, maxLength: 300 }), (triples) => {
        const seen = new Map<string, string>();
        for (const t of triples) {
          const id = workflowIdentifier(...t);
          const key = JSON.stringify(t);
          const before = seen.get(id);
          if (before !== undefined) expect(before).toBe(key);
          seen.set(id, key);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('refuses strings no triple makes', () => {
    for (const id of [
      'a_b',
      'a_b_c_d',
      'a-b-c',
      'a_b_C',
      'a_b_~zz',
      'a_b_~6',
      'a_b_~61', // `a` escaped: not the canonical spelling
      'a_b_~ff', // not UTF-8
    ]) {
      expect(parseWorkflowIdentifier(id), id).toBeUndefined();
    }
  });

  it('escapes what a Kubernetes name cannot hold, so the join stays unambiguous', () => {
    expect(workflowIdentifier('a_b', 'c', 'd')).toBe('a~5fb_c_d');
    expect(workflowIdentifier('a', 'b_c', 'd')).toBe('a_b~5fc_d');
    expect(workflowIdentifier('a~5fb', 'c', 'd')).toBe('a~7e5fb_c_d');
    expect(workflowIdentifier('Team', 'dev', 'x/y')).toBe('~54eam_dev_x~2fy');
  });
});
