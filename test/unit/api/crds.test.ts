import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { buildCrds } from '../../../api/crd.ts';
import { renderCrdFiles } from '../../../api/render-crds.ts';
import { crdRuleErrors, type OpenApiSchema } from '../../../api/structural.ts';

const root = join(import.meta.dirname, '..', '..', '..');

describe('generated CRDs', () => {
  it('match the checked-in files (run `npm run gen` after changing api/)', () => {
    for (const [path, content] of Object.entries(renderCrdFiles())) {
      expect(readFileSync(join(root, path), 'utf8'), `${path} is stale: run npm run gen`).toBe(
        content,
      );
    }
  });

  it('round-trip through YAML unchanged', () => {
    for (const crd of buildCrds()) {
      const name = (crd.metadata as { name: string }).name;
      expect(parse(readFileSync(join(root, 'crds', `${name}.yaml`), 'utf8'))).toEqual(crd);
    }
  });

  const crds = buildCrds().map((c) => c as unknown as CrdShape);
  interface CrdShape {
    spec: {
      names: { kind: string; shortNames: string[] };
      versions: {
        subresources: { status: object };
        additionalPrinterColumns: { name: string }[];
        schema: { openAPIV3Schema: OpenApiSchema };
      }[];
    };
  }

  it.each(crds.map((c) => [c.spec.names.kind, c] as const))(
    '%s has status subresource, short names, printer columns',
    (_k, crd) => {
      const v = crd.spec.versions[0]!;
      expect(v.subresources.status).toEqual({});
      expect(crd.spec.names.shortNames.length).toBeGreaterThan(0);
      const columns = v.additionalPrinterColumns.map((c) => c.name);
      expect(columns).toEqual(expect.arrayContaining(['Ready', 'Status', 'Age']));
      if (crd.spec.names.kind === 'WebhookTrigger') expect(columns).toContain('URL');
    },
  );

  it.each(crds.map((c) => [c.spec.names.kind, c] as const))(
    '%s is structural, described and its CEL rules compile',
    (_k, crd) => {
      const problems: string[] = [];
      const walk = (s: OpenApiSchema, path: string) => {
        for (const banned of ['anyOf', 'oneOf', 'allOf', 'const', '$ref'])
          if (banned in s) problems.push(`${path}: ${banned}`);
        if (s.additionalProperties === false) problems.push(`${path}: additionalProperties false`);
        if (!s.type && !s['x-kubernetes-preserve-unknown-fields'])
          problems.push(`${path}: no type`);
        if (path.includes('.spec') && !s.description) problems.push(`${path}: no description`);
        for (const [k, child] of Object.entries(s.properties ?? {})) walk(child, `${path}.${k}`);
        if (s.items) walk(s.items, `${path}[]`);
        if (typeof s.additionalProperties === 'object') walk(s.additionalProperties, `${path}{}`);
      };
      const schema = crd.spec.versions[0]!.schema.openAPIV3Schema;
      walk(schema, '');
      // Rules compile against their schema nodes, as the API server checks a CRD.
      for (const e of crdRuleErrors(schema)) problems.push(`${e.field}: ${e.message}`);
      expect(problems).toEqual([]);
    },
  );
});
