// Condition types and reasons, as named constants. The operator and the dev server
// write them; tests, docs and users read them. Reasons are CamelCase and stable.

/** Condition types of a WebhookTrigger. */
export const TriggerCondition = {
  /** The spec passed every check the CRD schema cannot make (references, secrets, JSON). */
  Valid: 'Valid',
  /**
   * The route is served: every live gateway serves the trigger's current generation
   * (as the gateways report it), like the Gateway API's `Programmed`. False while the
   * route is written but not yet served everywhere (GatewayPending), or when no
   * gateway is running (NoGateway).
   */
  Deployed: 'Deployed',
  /** The referenced workflow is published to the engine. */
  WorkflowPublished: 'WorkflowPublished',
  /** Summary: Valid, Deployed and WorkflowPublished are all True. */
  Ready: 'Ready',
} as const;

/** Condition types of a Workflow. */
export const WorkflowCondition = {
  /** The nodes form a runnable graph and every expression compiles. */
  Valid: 'Valid',
  /** Registered with the workflow engine (the Publish action). */
  Published: 'Published',
  /** Summary: Valid and Published are both True. */
  Ready: 'Ready',
} as const;

/** Reasons, shared by both kinds. */
export const Reason = {
  /** First visit: the controller has not finished computing this condition. */
  Reconciling: 'Reconciling',
  /** Every check passed. */
  Succeeded: 'Succeeded',
  /** The spec is inconsistent in a way the schema cannot express. */
  InvalidSpec: 'InvalidSpec',
  /** A referenced Secret does not exist. */
  SecretNotFound: 'SecretNotFound',
  /**
   * The operator may not read Secrets in the trigger's namespace: it is not one of the
   * namespaces it watches Secrets in (rbac.secretNamespaces), or the API server refuses
   * it (403, RBAC). The message says which; the Secret itself may well exist.
   */
  SecretForbidden: 'SecretForbidden',
  /** A referenced Secret lacks the key or holds unusable data. */
  SecretInvalid: 'SecretInvalid',
  /** The workflowRef names no Workflow. */
  WorkflowNotFound: 'WorkflowNotFound',
  /** The referenced Workflow exists but is not Ready (invalid). */
  WorkflowNotReady: 'WorkflowNotReady',
  /** spec.publish is false. */
  PublishDisabled: 'PublishDisabled',
  /** spec.deploy is false. */
  DeployDisabled: 'DeployDisabled',
  /** An older WebhookTrigger already serves the same URL. */
  PathConflict: 'PathConflict',
  /** Every live gateway serves the route at the trigger's current generation. */
  Deployed: 'Deployed',
  /**
   * The route is written but not every live gateway serves its current generation
   * yet ("served by N of M gateways"); looked at again when the gateways report, and
   * every few seconds until then.
   */
  GatewayPending: 'GatewayPending',
  /**
   * The route is written but no gateway is running: none has a live report of what it
   * serves (`hookgate gateway` replicas, or the dev role's own gateway).
   */
  NoGateway: 'NoGateway',
  /** Workflow registered. */
  Published: 'Published',
  /**
   * The shared store (routes, workflow registry, gateway reports; Redis in a cluster)
   * could not be read or written. The message says why; the reconcile is retried with
   * backoff and the condition clears when the store is back.
   */
  StoreError: 'StoreError',
  /** The waitForResponseNode mode needs a respond node in the workflow. */
  NoResponseNode: 'NoResponseNode',
} as const;
export type Reason = (typeof Reason)[keyof typeof Reason];

/** The finalizer the operator puts on both kinds before registering anything. */
export const FINALIZER = 'hookgate.dev/cleanup';
