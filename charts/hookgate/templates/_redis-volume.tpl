{{/*
Kubernetes forbids changing a StatefulSet's volumeClaimTemplates (and its selector):
`helm upgrade` with another redis.persistence.size or .storageClass would fail on the
StatefulSet with "spec: Forbidden: updates to statefulset spec for fields other than
...", after other objects of the release may already have changed. This check compares
the installed StatefulSet (`lookup`) with the values and fails the render first, naming
the value and the procedure (chart README, "Redis volume"). `lookup` answers nothing
under `helm template` and --dry-run=client: no check there, nor on a first install, nor
after `kubectl delete statefulset --cascade=orphan` (the procedure's step).
*/}}
{{- define "hookgate.redis.volumeCheck" -}}
{{- $name := include "hookgate.redis.fullname" . -}}
{{- $installed := lookup "apps/v1" "StatefulSet" .Release.Namespace $name -}}
{{- if $installed -}}
{{- $ns := .Release.Namespace -}}
{{- $claim := dict -}}
{{- range (dig "spec" "volumeClaimTemplates" list $installed) -}}
{{- if eq (dig "metadata" "name" "" .) "data" -}}
{{- $claim = . -}}
{{- end -}}
{{- end -}}
{{- $howTo := printf "Kubernetes does not let a StatefulSet's volumeClaimTemplates change, so this upgrade would fail on StatefulSet %s after other objects had changed. Procedure (chart README, \"Redis volume\"): grow the PersistentVolumeClaim data-%s-0 itself (kubectl -n %s patch pvc data-%s-0 -p '{\"spec\":{\"resources\":{\"requests\":{\"storage\":\"<size>\"}}}}', where its StorageClass allows volume expansion; another StorageClass needs a new volume), then kubectl -n %s delete statefulset %s --cascade=orphan (the Redis pod and its volume stay) and run the upgrade again" $name $name $ns $name $ns $name -}}
{{- if $claim -}}
{{- $installedSize := dig "spec" "resources" "requests" "storage" "" $claim | toString -}}
{{- $size := .Values.redis.persistence.size | toString -}}
{{- if ne (include "hookgate.quantityBytes" $installedSize) (include "hookgate.quantityBytes" $size) -}}
{{- fail (printf "redis.persistence.size is %s, but the installed Redis volume was claimed with %s. %s" $size $installedSize $howTo) -}}
{{- end -}}
{{- $installedClass := dig "spec" "storageClassName" "" $claim -}}
{{- $class := .Values.redis.persistence.storageClass | default "" -}}
{{- if ne $installedClass $class -}}
{{- fail (printf "redis.persistence.storageClass is %s, but the installed Redis volume was claimed with %s. Kubernetes does not let a StatefulSet's volumeClaimTemplates change, so this upgrade would fail on StatefulSet %s after other objects had changed, and a volume cannot move to another StorageClass in place. Keep the previous redis.persistence.storageClass, or move the data to a volume of the new class first (chart README, \"Redis volume\": snapshot or copy, kubectl -n %s delete statefulset %s --cascade=orphan, then the upgrade)" (ternary (quote $class) "empty (the cluster's default class)" (ne $class "")) (ternary (quote $installedClass) "no class (the cluster's default)" (ne $installedClass "")) $name $ns $name) -}}
{{- end -}}
{{- end -}}
{{- /* nameOverride (with a fixed fullnameOverride) changes the selector and the claim's labels. */ -}}
{{- $labels := include "hookgate.selectorLabels" (dict "ctx" . "component" "redis") | fromYaml | toJson -}}
{{- $installedLabels := dig "spec" "selector" "matchLabels" dict $installed | toJson -}}
{{- if ne $labels $installedLabels -}}
{{- fail (printf "the Redis StatefulSet's selector would change from %s to %s (nameOverride?): Kubernetes does not let a StatefulSet's selector or volumeClaimTemplates change. Keep the previous nameOverride, or kubectl -n %s delete statefulset %s --cascade=orphan first (chart README, \"Redis volume\")" $installedLabels $labels $ns $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
A Kubernetes quantity ("8Gi", "8192Mi", "10G", "1e9") as a number of bytes, so that
"8192Mi" in the values equals the "8Gi" the API server keeps (it writes quantities in
canonical form). What it cannot parse comes back as itself, to be compared as a string.
*/}}
{{- define "hookgate.quantityBytes" -}}
{{- $pattern := "^([0-9]+(?:\\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|[eE][0-9]+)?$" -}}
{{- if regexMatch $pattern . -}}
{{- $number := regexReplaceAll $pattern . "${1}" | float64 -}}
{{- $suffix := regexReplaceAll $pattern . "${2}" -}}
{{- $factors := dict "" 1.0 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "E" 1e18 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 -}}
{{- if hasKey $factors $suffix -}}
{{- mulf $number (get $factors $suffix) -}}
{{- else -}}
{{- /* An exponent: e9 is 10^9. */ -}}
{{- mulf $number (float64 (printf "1%s" $suffix)) -}}
{{- end -}}
{{- else -}}
{{- . -}}
{{- end -}}
{{- end -}}
