// Server-side printing (K30): `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`
// returns a meta.k8s.io/v1 Table whose columns are Name plus the CRD's
// additionalPrinterColumns (Name and Age when it has none).
import type { KubeObject, PrinterColumn, ResourceType } from './resources.ts';

export function wantsTable(accept: string | undefined): boolean {
  return /as=Table/.test(accept ?? '') && /g=meta\.k8s\.io/.test(accept ?? '');
}

const NAME_COLUMN = {
  name: 'Name',
  type: 'string',
  format: 'name',
  description:
    'Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names',
  priority: 0,
};

const AGE_COLUMN: PrinterColumn = {
  name: 'Age',
  type: 'date',
  jsonPath: '.metadata.creationTimestamp',
  description:
    'CreationTimestamp is a timestamp representing the server time when this object was created.',
};

// ---------------------------------------------------------------- JSONPath subset

type Step =
  | { kind: 'field'; name: string }
  | { kind: 'index'; index: number }
  | { kind: 'all' }
  | { kind: 'filter'; path: string[]; value: string };

function parsePath(path: string): Step[] {
  const steps: Step[] = [];
  const re =
    /\.([A-Za-z0-9_$-]+)|\[\?\(@\.([A-Za-z0-9_.]+)\s*==\s*["']([^"']*)["']\)\]|\[(\d+)\]|\[\*\]|\['([^']+)'\]/gy;
  const text = path.replace(/^\{|\}$/g, '');
  let m: RegExpExecArray | null;
  while ((m = re.exec(text)) !== null) {
    if (m[1] !== undefined) steps.push({ kind: 'field', name: m[1] });
    else if (m[2] !== undefined)
      steps.push({ kind: 'filter', path: m[2].split('.'), value: m[3] ?? '' });
    else if (m[4] !== undefined) steps.push({ kind: 'index', index: Number(m[4]) });
    else if (m[5] !== undefined) steps.push({ kind: 'field', name: m[5] });
    else steps.push({ kind: 'all' });
  }
  return steps;
}

function get(value: unknown, key: string): unknown {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)[key]
    : undefined;
}

/** Evaluate a printer-column JSONPath; returns every match. */
export function jsonPath(obj: unknown, path: string): unknown[] {
  let current: unknown[] = [obj];
  for (const step of parsePath(path)) {
    const next: unknown[] = [];
    for (const v of current) {
      if (step.kind === 'field') next.push(get(v, step.name));
      else if (step.kind === 'index') next.push(Array.isArray(v) ? v[step.index] : undefined);
      else if (Array.isArray(v)) {
        for (const item of v) {
          const probe = step.kind === 'filter' ? step.path.reduce<unknown>(get, item) : undefined;
          if (step.kind === 'all' || String(probe) === step.value) next.push(item);
        }
      }
    }
    current = next.filter((v) => v !== undefined);
  }
  return current;
}

/** apimachinery duration.HumanDuration: `7s`, `3m20s`, `5h`, `2d3h`... */
export function humanDuration(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`;
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`;
  if (hours < 48) return `${hours}h`;
  if (hours < 192)
    return hours % 24 === 0
      ? `${Math.floor(hours / 24)}d`
      : `${Math.floor(hours / 24)}d${hours % 24}h`;
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24)}d`;
  const days = Math.floor(hours / 24);
  const years = Math.floor(days / 365);
  if (hours < 24 * 365 * 8) return days % 365 === 0 ? `${years}y` : `${years}y${days % 365}d`;
  return `${years}y`;
}

/** One cell: null for a missing path or a value of the wrong type. */
function cell(obj: KubeObject, col: PrinterColumn): unknown {
  const [value] = jsonPath(obj, col.jsonPath);
  if (value === undefined || value === null) return null;
  switch (col.type) {
    case 'date': {
      const t = typeof value === 'string' ? Date.parse(value) : NaN;
      return Number.isNaN(t) ? null : humanDuration(Date.now() - t);
    }
    case 'integer':
      return typeof value === 'number' && Number.isInteger(value) ? value : null;
    case 'number':
      return typeof value === 'number' ? value : null;
    case 'boolean':
      return typeof value === 'boolean' ? value : null;
    case 'string':
      return typeof value === 'string' ? value : null;
    default:
      return typeof value === 'object' ? JSON.stringify(value) : value;
  }
}

export function toTable(
  rt: ResourceType,
  objects: KubeObject[],
  resourceVersion?: string,
): unknown {
  const columns = rt.printerColumns.length > 0 ? rt.printerColumns : [AGE_COLUMN];
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: resourceVersion ? { resourceVersion } : {},
    columnDefinitions: [
      NAME_COLUMN,
      ...columns.map((c) => ({
        name: c.name,
        type: c.type,
        format: c.format ?? '',
        description: c.description ?? '',
        priority: c.priority ?? 0,
      })),
    ],
    rows: objects.map((o) => ({
      cells: [o.metadata.name ?? '', ...columns.map((c) => cell(o, c))],
      object: { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata },
    })),
  };
}
