// auth.method signature: the presets and the generic scheme are admitted with their
// defaults; inconsistent generic schemes are refused with the field path. The same
// rules run in the test API server (with the real CEL cost limits) through
// test/unit/api/crd-bounds.test.ts and structural-vs-apiserver.test.ts.
import { describe, expect, it } from 'vitest';
import { admitResource } from '../../api/validate.ts';
import { SIGNATURE_PRESETS } from '../../api/v1alpha1/index.ts';
import { trigger } from '../support/manifests.ts';

const admit = (signature: Record<string, unknown>) =>
  admitResource(trigger('t', { auth: { method: 'signature', signature } }));
const errors = (r: ReturnType<typeof admitResource>) =>
  r.ok ? [] : r.errors.map((e) => `${e.field}: ${e.message}`);

const generic = (fields: Record<string, unknown>) => ({
  preset: 'generic',
  secretRef: { name: 's' },
  generic: { header: 'X-Signature', ...fields },
});

describe('auth.method signature: admitted', () => {
  it.each(SIGNATURE_PRESETS.filter((p) => p !== 'generic'))(
    'preset %s needs only a Secret; defaults filled in',
    (preset) => {
      const r = admit({ preset, secretRef: { name: 'hook-secret' } });
      expect(errors(r)).toEqual([]);
      if (!r.ok) return;
      expect((r.object.spec as { auth: unknown }).auth).toEqual({
        method: 'signature',
        signature: {
          preset,
          secretRef: { name: 'hook-secret' },
          toleranceSeconds: 300,
          rejectReplays: true,
        },
      });
    },
  );

  it('several Secret keys for rotation', () => {
    expect(
      errors(admit({ preset: 'github', secretRef: { name: 's', keys: ['current', 'previous'] } })),
    ).toEqual([]);
  });

  it('generic: defaults to hex HMAC-SHA256 of the body', () => {
    const r = admit(generic({}));
    expect(errors(r)).toEqual([]);
    if (!r.ok) return;
    const spec = r.object.spec as { auth: { signature: { generic: unknown } } };
    expect(spec.auth.signature.generic).toEqual({
      header: 'X-Signature',
      algorithm: 'sha256',
      encoding: 'hex',
      prefix: '',
      signedPayload: '{body}',
    });
  });

  it('generic: a template over timestamp, id and body', () => {
    const r = admit(
      generic({
        algorithm: 'sha512',
        encoding: 'base64',
        prefix: 'v1=',
        signedPayload: 'v1:{id}:{timestamp}:{body}',
        timestampHeader: 'X-Timestamp',
        idHeader: 'X-Delivery',
      }),
    );
    expect(errors(r)).toEqual([]);
  });
});

describe('auth.method signature: refused', () => {
  it.each([
    [
      'method without signature',
      { method: 'signature' },
      'spec.auth.signature: Required value: auth.signature is required when auth.method is signature',
    ],
  ])('%s', (_name, auth, error) => {
    expect(errors(admitResource(trigger('t', { auth })))).toContain(error);
  });

  it.each([
    [
      'unknown preset',
      { preset: 'gitlab', secretRef: { name: 's' } },
      'spec.auth.signature.preset',
    ],
    ['no Secret', { preset: 'github' }, 'spec.auth.signature.secretRef'],
    [
      'generic without its scheme',
      { preset: 'generic', secretRef: { name: 's' } },
      'spec.auth.signature.generic',
    ],
    [
      'a preset with a generic scheme',
      { ...generic({}), preset: 'github' },
      'spec.auth.signature.generic',
    ],
    ['unknown algorithm', generic({ algorithm: 'md5' }), 'spec.auth.signature.generic.algorithm'],
    ['unknown encoding', generic({ encoding: 'base32' }), 'spec.auth.signature.generic.encoding'],
    [
      'a payload without the body',
      generic({ signedPayload: '{timestamp}.x', timestampHeader: 'X-T' }),
      'spec.auth.signature.generic.signedPayload',
    ],
    [
      'an unknown placeholder',
      generic({ signedPayload: '{nonce}.{body}' }),
      'spec.auth.signature.generic.signedPayload',
    ],
    [
      'a timestamp header that is not signed',
      generic({ timestampHeader: 'X-Timestamp' }),
      'spec.auth.signature.generic.timestampHeader',
    ],
    [
      'a signed timestamp without its header',
      generic({ signedPayload: '{timestamp}.{body}' }),
      'spec.auth.signature.generic.timestampHeader',
    ],
    [
      'a signed id without its header',
      generic({ signedPayload: '{id}.{body}' }),
      'spec.auth.signature.generic.idHeader',
    ],
    [
      'tolerance of zero',
      { preset: 'stripe', secretRef: { name: 's' }, toleranceSeconds: 0 },
      'spec.auth.signature.toleranceSeconds',
    ],
    [
      'seventeen secrets',
      {
        preset: 'github',
        secretRef: { name: 's', keys: Array.from({ length: 17 }, (_, i) => `k${i}`) },
      },
      'spec.auth.signature.secretRef.keys',
    ],
  ])('%s', (_name, signature, field) => {
    const r = admit(signature);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors.map((e) => e.field)).toContain(field);
  });
});
