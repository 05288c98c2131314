// The workflow engine's public surface (see docs/workflows.md and docs/callbacks.md).
export { InProcessEngine, ExecutionFailure, type InProcessEngineOptions } from './engine.ts';
export { triggerRef } from './trigger-ref.ts';
export {
  MemoryExecutionStore,
  type ExecutionStore,
  type MemoryExecutionStoreOptions,
} from './execution-store.ts';
export {
  CallbackSender,
  callbackBody,
  generateSecret,
  signPayload,
  validateCallbackUrl,
  webhookIdFor,
  type CallbackBody,
  type CallbackSenderOptions,
  type DeliveryResult,
} from './callbacks.ts';
export {
  OutboundGuard,
  OutboundRefusedError,
  blockedRange,
  type OutboundGuardOptions,
  type OutboundRules,
  type OutboundScope,
  type OutboundTarget,
} from './outbound/guard.ts';
export type * from './ports.ts';
export {
  MemoryIdempotencyStore,
  parseIdempotencyKey,
  requestFingerprint,
  type BeginResult,
  type IdempotencyRecord,
  type IdempotencyStore,
} from '../gateway/idempotency/store.ts';
