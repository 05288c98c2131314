{{/*
Helpers, all namespaced "hookgate.". Helpers that take a component are called with
(dict "ctx" $ "component" "<operator|gateway|worker|...>").
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "hookgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The resource name prefix: fullnameOverride, else the release name when it already
contains the chart name, else "<release>-<chart>". infra/plan.ts mirrors this rule.
*/}}
{{- define "hookgate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "<fullname>-<component>", for per-role objects. */}}
{{- define "hookgate.componentName" -}}
{{- printf "%s-%s" (include "hookgate.fullname" .ctx) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* chart name and version, for the helm.sh/chart label. */}}
{{- define "hookgate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels: immutable on Deployments, so only name, instance and component. */}}
{{- define "hookgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hookgate.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The recommended app.kubernetes.io/* labels, plus helm.sh/chart. */}}
{{- define "hookgate.labels" -}}
helm.sh/chart: {{ include "hookgate.chart" .ctx }}
{{ include "hookgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: hookgate
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
{{- end -}}

{{/*
The recommended labels without those that name the chart's version (helm.sh/chart,
app.kubernetes.io/version): for a pod template that must not change, and so restart its
pods, when only the chart does (the chart's Redis).
*/}}
{{- define "hookgate.unversionedLabels" -}}
{{ include "hookgate.selectorLabels" . }}
app.kubernetes.io/part-of: hookgate
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
{{- end -}}

{{/*
The ServiceAccounts, one per role (serviceAccount.*): the operator's holds its RBAC, the
gateway's at most system:auth-delegator (admin.auth kubernetes), the workers' and Redis'
nothing. With serviceAccount.create=false each rendered role's account must be named:
never the namespace's `default`, which every other pod of the namespace runs as. No role
may share the operator's account, and the workers and Redis not the gateway's. Fails the
render saying what to set; the name helpers below call it.
*/}}
{{- define "hookgate.serviceAccounts.check" -}}
{{- $sa := .Values.serviceAccount -}}
{{- $roles := include "hookgate.serviceAccounts.roles" . | fromJson -}}
{{- if not $sa.create -}}
{{- $missing := list -}}
{{- if not $sa.name -}}
{{- $missing = append $missing "serviceAccount.name (the operator's, bound to its RBAC)" -}}
{{- end -}}
{{- range $role := list "gateway" "worker" "redis" -}}
{{- if and (hasKey $roles $role) (not (get $sa $role).name) -}}
{{- $missing = append $missing (printf "serviceAccount.%s.name" $role) -}}
{{- end -}}
{{- end -}}
{{- with $missing -}}
{{- fail (printf "serviceAccount.create is false, so the pods run as ServiceAccounts you created: set %s. The chart never falls back to the namespace's default account (the operator's rights would be bound to it)." (join ", " .)) -}}
{{- end -}}
{{- end -}}
{{- $operator := get $roles "operator" -}}
{{- range $role := list "gateway" "worker" "redis" -}}
{{- if eq (get $roles $role | default "") $operator -}}
{{- fail (printf "serviceAccount.%s.name must differ from serviceAccount.name (the operator's account, which may read Secrets cluster-wide): give the %s an account of its own" $role $role) -}}
{{- end -}}
{{- end -}}
{{- range $role := list "worker" "redis" -}}
{{- if eq (get $roles $role | default "") (get $roles "gateway") -}}
{{- fail (printf "serviceAccount.%s.name must differ from serviceAccount.gateway.name (bound to system:auth-delegator with admin.auth kubernetes): the %s needs no rights" $role $role) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The account of each rendered role as JSON ({"operator": ..., "gateway": ..., "worker": ...,
"redis": ...}; worker only in queue mode, redis only with the chart's Redis): the name
set, else "<fullname>[-<role>]" when the chart creates them, else "".
*/}}
{{- define "hookgate.serviceAccounts.roles" -}}
{{- $sa := .Values.serviceAccount -}}
{{- $fullname := include "hookgate.fullname" . -}}
{{- $names := dict "operator" ($sa.name | default (ternary $fullname "" $sa.create)) -}}
{{- $roles := list "gateway" -}}
{{- if eq .Values.gateway.executions "queue" }}{{ $roles = append $roles "worker" }}{{ end -}}
{{- if .Values.redis.enabled }}{{ $roles = append $roles "redis" }}{{ end -}}
{{- range $role := $roles -}}
{{- $generated := include "hookgate.componentName" (dict "ctx" $ "component" $role) -}}
{{- $_ := set $names $role ((get $sa $role).name | default (ternary $generated "" $sa.create)) -}}
{{- end -}}
{{- toJson $names -}}
{{- end -}}

{{/* The ServiceAccount a role runs as (.role: operator, gateway, worker or redis). */}}
{{- define "hookgate.serviceAccountName" -}}
{{- include "hookgate.serviceAccounts.check" .ctx -}}
{{- get (include "hookgate.serviceAccounts.roles" .ctx | fromJson) .role -}}
{{- end -}}

{{/* repository@digest when image.digest is set, else repository:tag (default the appVersion). */}}
{{- define "hookgate.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* The chart Redis' image: repository@digest when redis.image.digest is set, else repository:tag. */}}
{{- define "hookgate.redis.image" -}}
{{- with .Values.redis.image -}}
{{- if .digest -}}
{{- printf "%s@%s" .repository .digest -}}
{{- else -}}
{{- printf "%s:%s" .repository .tag -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The gateway's public base URL (HOOKGATE_BASE_URL). */}}
{{- define "hookgate.baseUrl" -}}
{{- if .Values.config.baseUrl -}}
{{- trimSuffix "/" .Values.config.baseUrl -}}
{{- else if and .Values.ingress.enabled .Values.ingress.host -}}
{{- printf "%s://%s" (ternary "https" "http" .Values.ingress.tls.enabled) .Values.ingress.host -}}
{{- else -}}
{{- $port := int .Values.gateway.service.port -}}
{{- printf "http://%s.%s.svc%s" (include "hookgate.componentName" (dict "ctx" . "component" "gateway")) .Release.Namespace (ternary "" (printf ":%d" $port) (eq $port 80)) -}}
{{- end -}}
{{- end -}}

{{/* Environment every role shares. */}}
{{- define "hookgate.commonEnv" -}}
- name: HOST
  value: 0.0.0.0
- name: METRICS_PORT
  value: {{ .Values.metrics.port | quote }}
- name: LOG_LEVEL
  value: {{ .Values.config.logLevel | quote }}
- name: HOOKGATE_REDIS_COMMAND_TIMEOUT_MS
  value: {{ .Values.config.redisClient.commandTimeoutMs | int64 | quote }}
- name: HOOKGATE_REDIS_BREAKER_FAILURES
  value: {{ .Values.config.redisClient.breakerFailures | int64 | quote }}
- name: HOOKGATE_REDIS_BREAKER_OPEN_MS
  value: {{ .Values.config.redisClient.breakerOpenMs | int64 | quote }}
- name: HOOKGATE_REDIS_WRITE_WINDOW_MS
  value: {{ .Values.config.redisClient.writeWindowMs | int64 | quote }}
- name: HOOKGATE_LOG_BUFFER_BYTES
  value: {{ include "hookgate.logBufferBytes" . | quote }}
- name: HOOKGATE_LOG_STALL_MS
  value: {{ .Values.config.logOutput.stallMs | int64 | quote }}
- name: HOOKGATE_LOG_SYNC_FLUSH_MS
  value: {{ .Values.config.logOutput.syncFlushMs | int64 | quote }}
- name: HOOKGATE_BASE_URL
  value: {{ include "hookgate.baseUrl" . | quote }}
{{ include "hookgate.redisEnv" . }}
{{- end -}}

{{/*
config.logOutput.bufferBytes as given (HOOKGATE_LOG_BUFFER_BYTES: bytes, or a size with a
unit as runtime/bounded.ts parseBytes reads it; the schema checks the form). Fails the
render outside 64Ki to 64Mi, which the schema can check for plain numbers only.
*/}}
{{- define "hookgate.logBufferBytes" -}}
{{- $value := .Values.config.logOutput.bufferBytes -}}
{{- $raw := ternary $value (toString (int64 $value)) (kindIs "string" $value) -}}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" $raw -}}
{{- $units := dict "b" 1 "k" 1024 "kb" 1024 "ki" 1024 "kib" 1024 "m" 1048576 "mb" 1048576 "mi" 1048576 "mib" 1048576 "g" 1073741824 "gb" 1073741824 "gi" 1073741824 "gib" 1073741824 -}}
{{- $unit := lower (trimPrefix $number $raw) | default "b" -}}
{{- $bytes := floor (mulf (float64 $number) (get $units $unit)) -}}
{{- if or (lt $bytes 65536.0) (gt $bytes 67108864.0) -}}
{{- fail (printf "config.logOutput.bufferBytes must be a size from 64Ki to 64Mi (e.g. 4Mi), not %q" $raw) -}}
{{- end -}}
{{- $raw -}}
{{- end -}}

{{/*
The byte budgets and stream caps a role uses (config.budgets, docs/limits.md), only
those set: unset keys keep the product's defaults. .keys: the config.budgets keys the role reads.
*/}}
{{- define "hookgate.budgetEnv" -}}
{{- $names := dict "executionStoreBytes" "HOOKGATE_EXECUTION_STORE_BYTES" "storedBodyBytes" "HOOKGATE_STORED_BODY_BYTES" "executionTtlMs" "HOOKGATE_EXECUTION_TTL_MS" "idempotencyBytes" "HOOKGATE_IDEMPOTENCY_BYTES" "streamBufferBytes" "HOOKGATE_STREAM_BUFFER_BYTES" "listPageBytes" "HOOKGATE_LIST_PAGE_BYTES" "analyticsBytes" "HOOKGATE_ANALYTICS_BYTES" "streamsPerExecution" "HOOKGATE_STREAMS_PER_EXECUTION" "streamsPerProcess" "HOOKGATE_STREAMS_PER_PROCESS" -}}
{{- $budgets := .ctx.Values.config.budgets | default dict -}}
{{- range $key := .keys }}
{{- $value := get $budgets $key }}
{{- if not (kindIs "invalid" $value) }}
- name: {{ get $names $key }}
  value: {{ ternary $value (toString (int64 $value)) (kindIs "string" $value) | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The outbound policy of the roles that send requests (gateway, worker); nothing when unset. */}}
{{- define "hookgate.outboundEnv" -}}
{{- with .Values.outbound.allow }}
- name: HOOKGATE_OUTBOUND_ALLOW
  value: {{ join "," . | quote }}
{{- end }}
{{- with .Values.outbound.deny }}
- name: HOOKGATE_OUTBOUND_DENY
  value: {{ join "," . | quote }}
{{- end }}
{{- with .Values.outbound.namespaces }}
- name: HOOKGATE_OUTBOUND_NAMESPACES
  value: {{ toJson . | quote }}
{{- end }}
{{- end -}}

{{/* Where the roles that run executions evaluate JSONata (ADR 0048); nothing when inline. */}}
{{- define "hookgate.expressionEnv" -}}
{{- if eq .Values.config.expressionIsolation "worker" }}
- name: HOOKGATE_EXPRESSION_ISOLATION
  value: worker
{{- end }}
{{- end -}}

{{/* The chart's Redis: StatefulSet, headless Service, ConfigMap and Secret share this name. */}}
{{- define "hookgate.redis.fullname" -}}
{{- include "hookgate.componentName" (dict "ctx" . "component" "redis") -}}
{{- end -}}

{{/* The Secret holding the password of the chart's Redis, and its key. */}}
{{- define "hookgate.redis.secretName" -}}
{{- default (include "hookgate.redis.fullname" .) .Values.redis.auth.existingSecret -}}
{{- end -}}

{{/*
Exactly one Redis: the chart's (redis.enabled) or yours (externalRedis), and no password
in externalRedis.url (it would be in every pod spec). Fails the render with what to
change otherwise.
*/}}
{{- define "hookgate.redis.check" -}}
{{- $external := or .Values.externalRedis.url .Values.externalRedis.existingSecret.name -}}
{{- if and .Values.redis.enabled $external -}}
{{- fail "redis.enabled and externalRedis are mutually exclusive: set redis.enabled=false to use externalRedis, or unset externalRedis.url and externalRedis.existingSecret.name to use the chart's Redis" -}}
{{- end -}}
{{- if and (not .Values.redis.enabled) (not $external) -}}
{{- fail "redis.enabled is false: set externalRedis.url or externalRedis.existingSecret.name to the Redis hookgate should use" -}}
{{- end -}}
{{- if and .Values.externalRedis.url .Values.externalRedis.existingSecret.name -}}
{{- fail "externalRedis: set url or existingSecret.name, not both" -}}
{{- end -}}
{{- if regexMatch "^rediss?://[^@/]*:[^@/]+@" .Values.externalRedis.url -}}
{{- fail "externalRedis.url carries a password, which would be readable in the pod spec of every role: put the URL in a Secret and set externalRedis.existingSecret.name (and .key) instead" -}}
{{- end -}}
{{- end -}}

{{/*
REDIS_URL for the roles. The chart's Redis: the password from its Secret, put into the
URL by the kubelet ($(REDIS_PASSWORD) expands a variable defined before it), so the pod
spec never holds it. externalRedis: the URL from its Secret, or as given.
*/}}
{{- define "hookgate.redisEnv" -}}
{{- include "hookgate.redis.check" . -}}
{{- if .Values.redis.enabled -}}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "hookgate.redis.secretName" . }}
      key: {{ .Values.redis.auth.existingSecretKey }}
- name: REDIS_URL
  value: {{ printf "redis://:$(REDIS_PASSWORD)@%s.%s.svc:6379" (include "hookgate.redis.fullname" .) .Release.Namespace | quote }}
{{- else if .Values.externalRedis.existingSecret.name -}}
- name: REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.externalRedis.existingSecret.name }}
      key: {{ .Values.externalRedis.existingSecret.key }}
{{- else -}}
- name: REDIS_URL
  value: {{ .Values.externalRedis.url | quote }}
{{- end -}}
{{- end -}}

{{/*
Fails the render unless a role's terminationGracePeriodSeconds (.grace) covers its preStop
sleep (.preStop, 0 without a hook), the process' own shutdown (roles/lifecycle.ts
SHUTDOWN_GRACE_MS: 25 s after SIGTERM, then it exits by force) and the write of its last
log lines at that forced exit (config.logOutput.syncFlushMs, .syncFlushMs, in whole
seconds), and one second more (the forced exit's timer may fire late, and the kubelet
counts the preStop sleep in whole seconds): otherwise the kubelet's SIGKILL lands with,
or before, the process' own forced exit and its last write. .role: the values key
(gateway, worker).
*/}}
{{- define "hookgate.graceCheck" -}}
{{- $grace := int .grace -}}
{{- $flush := div (add (int .syncFlushMs) 999) 1000 -}}
{{- $needed := add (int .preStop) 25 $flush 1 -}}
{{- if lt $grace (int $needed) -}}
{{- $why := printf "the process drains for up to 25 s, then exits by force and writes its last log lines for up to config.logOutput.syncFlushMs (%d ms), and needs a second of margin, so a shorter grace period kills it (SIGKILL) mid-drain" (int .syncFlushMs) -}}
{{- if .preStop -}}
{{- fail (printf "%s.terminationGracePeriodSeconds (%d) must be at least %s.preStopSleepSeconds (%d) + 25 + %d + 1 = %d: SIGTERM comes after the preStop sleep, %s" .role $grace .role (int .preStop) $flush $needed $why) -}}
{{- else -}}
{{- fail (printf "%s.terminationGracePeriodSeconds (%d) must be at least %d: after SIGTERM %s" .role $grace $needed $why) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The gateway's three listeners need three ports: webhooks on 8080 (PORT), metrics and
probes on metrics.port, the admin API on admin.port. A clash would be a duplicate
containerPort and EADDRINUSE at start (or, for metrics on 8080, /metrics on the public
port); fails the render naming the values.
*/}}
{{- define "hookgate.gatewayPortsCheck" -}}
{{- $admin := int .Values.admin.port -}}
{{- $metrics := int .Values.metrics.port -}}
{{- if eq $admin $metrics -}}
{{- fail (printf "admin.port (%d) must differ from metrics.port (%d): the gateway listens on both" $admin $metrics) -}}
{{- end -}}
{{- if eq $admin 8080 -}}
{{- fail "admin.port (8080) must differ from the gateway's webhook port 8080: the gateway listens on both" -}}
{{- end -}}
{{- if eq $metrics 8080 -}}
{{- fail "metrics.port (8080) must differ from the gateway's webhook port 8080: metrics and probes would be served on the public port (and behind the Ingress)" -}}
{{- end -}}
{{- end -}}

{{/*
The TLS Secret of the admin Ingress, empty without TLS: admin.ingress.tls's own, else, on
the webhook host (admin.ingress.host empty or ingress.host), the webhook Ingress' (ingress.tls).
*/}}
{{- define "hookgate.adminIngress.tlsSecret" -}}
{{- $fullname := include "hookgate.fullname" . -}}
{{- $admin := .Values.admin.ingress -}}
{{- if $admin.tls.enabled -}}
{{- default (printf "%s-admin-tls" $fullname) $admin.tls.secretName -}}
{{- else if and .Values.ingress.tls.enabled (or (not $admin.host) (eq $admin.host .Values.ingress.host)) -}}
{{- default (printf "%s-tls" $fullname) .Values.ingress.tls.secretName -}}
{{- end -}}
{{- end -}}

{{/* The writable /tmp of a pod whose root filesystem is read-only. */}}
{{- define "hookgate.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.tmpDir.sizeLimit }}
{{- end -}}

{{/* Pod-level security: non-root, RuntimeDefault seccomp. */}}
{{- define "hookgate.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.podSecurityContext.runAsUser }}
runAsGroup: {{ .Values.podSecurityContext.runAsGroup }}
fsGroup: {{ .Values.podSecurityContext.fsGroup }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Container-level security: read-only root, no privilege escalation, no capabilities. */}}
{{- define "hookgate.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.podSecurityContext.runAsUser }}
runAsGroup: {{ .Values.podSecurityContext.runAsGroup }}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Probes against the role's health endpoints; .port is a container port name. */}}
{{- define "hookgate.probes" -}}
readinessProbe:
  httpGet:
    path: /readyz
    port: {{ .port }}
  periodSeconds: 5
  failureThreshold: 3
livenessProbe:
  httpGet:
    path: /healthz
    port: {{ .port }}
  initialDelaySeconds: 10
  periodSeconds: 10
  failureThreshold: 3
{{- end -}}

{{/* Scheduling and pull secrets from a role's values (.role) and the chart's. */}}
{{- define "hookgate.podScheduling" -}}
{{- with .ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .role.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .role.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
Spread a role's replicas over nodes when the scheduler can (never blocks scheduling),
so two operator or gateway replicas do not share one node's fate.
*/}}
{{- define "hookgate.topologySpread" -}}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "hookgate.selectorLabels" . | nindent 8 }}
{{- end -}}
