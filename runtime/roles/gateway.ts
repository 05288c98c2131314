// `hookgate gateway`: serves the routes an operator wrote to Redis (any number of
// replicas; rate limits shared through Redis). Executions run in this process until
// the worker role and its Redis queue exist.
import type { Redis } from 'ioredis';
import { createServing, createStores, type Serving, type ServingOptions } from './serving.ts';

export interface GatewayOptions extends ServingOptions {
  redis: Redis;
}

export async function createGatewayRuntime(options: GatewayOptions): Promise<Serving> {
  const stores = createStores(options.redis);
  const serving = await createServing(options, stores);
  return {
    ...serving,
    async close() {
      await serving.close();
      stores.close();
    },
  };
}
