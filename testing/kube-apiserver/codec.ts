// What reading a custom resource from storage does to it. The API server's storage
// codec for CRs decodes through the structural schema of the CRD as it is now:
// schemaCoercingDecoder prunes (and drops nulls on non-nullable fields), then
// unstructuredDefaulter applies the defaults (apiextensions-apiserver
// pkg/apiserver/customresource_handler.go, crdConversionRESTOptionsGetter). So a
// default a CRD update adds shows on GET, LIST and WATCH at once, without a write, and
// an update starts from the defaulted object: a finalizer-only patch leaves the spec,
// and so the generation, alone. Storage itself keeps what was written (etcd's bytes).
import type { KubeObject, ResourceType } from './resources.ts';
import { decode } from './schema/index.ts';

/** The object as a read (GET, LIST, WATCH, or the start of an update) returns it. */
export function fromStorage(rt: ResourceType, stored: KubeObject): KubeObject {
  if (!rt.schema) return stored;
  const { metadata, ...rest } = structuredClone(stored);
  decode(rest, rt.schema);
  return { ...rest, metadata };
}
