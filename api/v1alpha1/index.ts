// The hookgate.dev/v1alpha1 API: the one module both the operator and the runtime import.
export * from './common.ts';
export * from './conditions.ts';
export * from './workflow.ts';
export * from './webhook-trigger.ts';
