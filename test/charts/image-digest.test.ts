// Images pinned by digest (image.digest, redis.image.digest): `repository@sha256:…`
// instead of a tag, so a moved tag never changes what runs.
import { describe, expect, it } from 'vitest';
import {
  ROLES,
  container,
  deployment,
  redisStatefulSet,
  render,
  renderError,
  tools,
} from './chart.ts';

const DIGEST = `sha256:${'0123456789abcdef'.repeat(4)}`;
const REDIS_DIGEST = `sha256:${'fedcba9876543210'.repeat(4)}`;

describe.skipIf(!tools)('chart: image digests', () => {
  it('runs repository@digest when a digest is set, else repository:tag', async () => {
    const tagged = await render();
    expect(container(deployment(tagged, 'gateway')).image).toBe('localhost/hookgate:0.1.0');
    expect(container(redisStatefulSet(tagged)).image).toBe('docker.io/library/redis:7.2.11');

    const pinned = await render(
      'image.repository=registry.example.com/hookgate',
      `image.digest=${DIGEST}`,
      `redis.image.digest=${REDIS_DIGEST}`,
    );
    for (const role of ROLES) {
      expect(container(deployment(pinned, role)).image, role).toBe(
        `registry.example.com/hookgate@${DIGEST}`,
      );
    }
    expect(container(redisStatefulSet(pinned)).image).toBe(
      `docker.io/library/redis@${REDIS_DIGEST}`,
    );
  });

  it('refuses a digest that is not sha256:<64 hex digits>', async () => {
    for (const bad of ['sha256:abc', `sha512:${'0'.repeat(64)}`, `SHA256:${'0'.repeat(64)}`]) {
      expect(await renderError(`image.digest=${bad}`), bad).toMatch(/\/image\/digest/);
      expect(await renderError(`redis.image.digest=${bad}`), bad).toMatch(/\/redis\/image\/digest/);
    }
  });
});
