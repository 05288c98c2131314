// Strict Pulumi mocks for the infra tests: pulumi.runtime.setMocks whose newResource
// refuses every resource type not listed and whose call refuses every call, plus a
// recorder around the SDK's mock monitor that sees what newResource cannot: each
// registration's parent, retainOnDelete and dependencies, and registered outputs.
import * as pulumi from '@pulumi/pulumi';
import { COMPONENT_TYPE } from '../../infra/plan.ts';

/** Every resource type the component may register. */
export const T = {
  component: COMPONENT_TYPE,
  namespace: 'kubernetes:core/v1:Namespace',
  secret: 'kubernetes:core/v1:Secret',
  chart: 'kubernetes:helm.sh/v4:Chart',
} as const;

/** How a secret value looks on the wire (pulumi.runtime.specialSigKey / specialSecretSig). */
export const SECRET_SIG = pulumi.runtime.specialSigKey;
export const SECRET_SIG_VALUE = pulumi.runtime.specialSecretSig;

/** What the mock monitor saw for one registration. */
export interface Registration {
  type: string;
  name: string;
  custom: boolean;
  parent: string;
  retainOnDelete: boolean;
  dependencies: string[];
  /** The inputs as newResource received them (secrets keep Pulumi's secret wrapper). */
  inputs: Record<string, unknown>;
}

export interface Recorder {
  registrations: Registration[];
  outputsByUrn: Map<string, Record<string, unknown>>;
  /** Everything refused (also an unhandled rejection from the SDK, failing the run). */
  refused: string[];
  reset(): void;
}

// The parts of the mock monitor's gRPC requests read here. The monitor is the SDK's own
// MockMonitor; wrapping it is the only way to see parents and resource options.
interface RegisterResourceRequest {
  getType(): string;
  getName(): string;
  getCustom(): boolean;
  getParent(): string;
  getRetainondelete(): boolean;
  getDependenciesList(): string[];
}
interface RegisterOutputsRequest {
  getUrn(): string;
  getOutputs(): { toJavaScript(): Record<string, unknown> } | undefined;
}
type Callback = (err: Error | null, res?: unknown) => void;
interface WrappableMonitor {
  registerResource(req: RegisterResourceRequest, cb: Callback): void;
  registerResourceOutputs(req: RegisterOutputsRequest, cb: Callback): void;
}

export const PROJECT = 'hookgate';
export const STACK = 'test';

export async function installStrictMocks(): Promise<Recorder> {
  const expected = new Set<string>(Object.values(T));
  const inputsByKey = new Map<string, Record<string, unknown>>();
  const rec: Recorder = {
    registrations: [],
    outputsByUrn: new Map(),
    refused: [],
    reset() {
      rec.registrations.length = 0;
      rec.outputsByUrn.clear();
      rec.refused.length = 0;
      inputsByKey.clear();
    },
  };
  await pulumi.runtime.setMocks(
    {
      newResource(args: pulumi.runtime.MockResourceArgs): pulumi.runtime.MockResourceResult {
        if (!expected.has(args.type)) {
          rec.refused.push(`resource ${args.type} "${args.name}"`);
          throw new Error(`unexpected resource ${args.type} "${args.name}"`);
        }
        const inputs = args.inputs as Record<string, unknown>;
        inputsByKey.set(`${args.type}::${args.name}`, inputs);
        return { id: args.custom ? `${args.name}-id` : undefined, state: inputs };
      },
      call(args: pulumi.runtime.MockCallArgs): pulumi.runtime.MockCallResult {
        rec.refused.push(`call ${args.token}`);
        throw new Error(`unexpected call ${args.token}`);
      },
    },
    PROJECT,
    STACK,
    false,
  );
  // The SDK types the monitor as a gRPC client; the mock behind it has these two methods.
  const monitor = pulumi.runtime.getMonitor() as unknown as WrappableMonitor;
  const register = monitor.registerResource.bind(monitor);
  monitor.registerResource = (req, cb) => {
    register(req, (err, res) => {
      if (!err) {
        rec.registrations.push({
          type: req.getType(),
          name: req.getName(),
          custom: req.getCustom(),
          parent: req.getParent(),
          retainOnDelete: req.getRetainondelete(),
          dependencies: req.getDependenciesList(),
          inputs: inputsByKey.get(`${req.getType()}::${req.getName()}`) ?? {},
        });
      }
      cb(err, res);
    });
  };
  const registerOutputs = monitor.registerResourceOutputs.bind(monitor);
  monitor.registerResourceOutputs = (req, cb) => {
    rec.outputsByUrn.set(req.getUrn(), req.getOutputs()?.toJavaScript() ?? {});
    registerOutputs(req, cb);
  };
  return rec;
}

/** The URN the mock monitor gives a direct child of the component. */
export function childUrn(r: Pick<Registration, 'type' | 'name'>): string {
  return `urn:pulumi:${STACK}::${PROJECT}::${COMPONENT_TYPE}$${r.type}::${r.name}`;
}

/** An Output's value (the mocks resolve every Output). */
export function valueOf<V>(output: pulumi.Output<V>): Promise<V> {
  return new Promise((resolve) => output.apply((v) => resolve(v)));
}
