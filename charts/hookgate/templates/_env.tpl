{{/*
The environment of each hookgate role, as YAML lists: the deployments render them through
"hookgate.env", which appends the role's extraEnv.
*/}}

{{/*
A role's env: the chart's (.env, rendered YAML) then .extra (<role>.extraEnv). Fails the
render when extraEnv names a variable the chart sets (a duplicate env name is refused by
server-side apply and would override what the chart checks, such as
HOOKGATE_ADMIN_AUTH) or one twice. .role: the values key.
*/}}
{{- define "hookgate.env" -}}
{{- $names := list -}}
{{- range (.env | fromYamlArray) -}}
{{- $names = append $names .name -}}
{{- end -}}
{{- $seen := list -}}
{{- range .extra -}}
{{- if has .name $names -}}
{{- $hint := "set it through the chart's values (values.yaml) instead" -}}
{{- if and (eq $.role "operator") (eq .name "NODE_OPTIONS") -}}
{{- $hint = "operator.nodeOptions: set that, or set it to '' and NODE_OPTIONS here" -}}
{{- end -}}
{{- fail (printf "%s.extraEnv sets %s, which the chart sets itself (%s)" $.role .name $hint) -}}
{{- end -}}
{{- if has .name $seen -}}
{{- fail (printf "%s.extraEnv sets %s twice" $.role .name) -}}
{{- end -}}
{{- $seen = append $seen .name -}}
{{- end -}}
{{ .env | trim }}
{{- with .extra }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The gateway's env (deployment-gateway.yaml). */}}
{{- define "hookgate.gateway.env" -}}
- name: PORT
  value: '8080'
# The read API, test requests, analytics, dashboard, live streams.
- name: ADMIN_PORT
  value: {{ .Values.admin.port | quote }}
- name: HOOKGATE_ADMIN_AUTH
  value: {{ .Values.admin.auth | quote }}
{{- if eq .Values.admin.auth "token" }}
- name: HOOKGATE_ADMIN_TOKEN_FILE
  value: /var/run/hookgate/admin/token
{{- end }}
{{- include "hookgate.commonEnv" . | nindent 0 }}
- name: HOOKGATE_TRUSTED_PROXIES
  value: {{ join "," .Values.config.trustedProxies | quote }}
- name: HOOKGATE_TRACE_CONTEXT
  value: {{ .Values.config.traceContext | quote }}
{{- include "hookgate.tracing.env" . | nindent 0 }}
{{- include "hookgate.outboundEnv" . | nindent 0 }}
{{- include "hookgate.expressionEnv" . | nindent 0 }}
# queue: executions go to Redis for the workers; inline: this process runs them.
- name: HOOKGATE_EXECUTIONS
  value: {{ .Values.gateway.executions | quote }}
{{- if eq .Values.gateway.executions "queue" }}
- name: HOOKGATE_MAX_QUEUED
  value: {{ .Values.gateway.maxQueued | int64 | quote }}
- name: HOOKGATE_QUEUE_SHARDS
  value: {{ .Values.config.queueShards | int64 | quote }}
{{- if gt (int64 .Values.gateway.ackReplicas) 0 }}
{{- if .Values.redis.enabled }}
{{- fail "gateway.ackReplicas needs a Redis with replicas (externalRedis): the chart's Redis has none, so every queued execution would be answered 503 store-unavailable" }}
{{- end }}
- name: HOOKGATE_QUEUE_ACK_REPLICAS
  value: {{ .Values.gateway.ackReplicas | int64 | quote }}
- name: HOOKGATE_QUEUE_ACK_TIMEOUT_MS
  value: {{ .Values.gateway.ackTimeoutMs | int64 | quote }}
{{- end }}
{{- end }}
{{- if eq .Values.gateway.executions "inline" }}
{{- include "hookgate.callbackSecret.env" . | nindent 0 }}
{{- end }}
{{- include "hookgate.analytics.env" . | nindent 0 }}
{{- include "hookgate.budgetEnv" (dict "ctx" . "keys" (list "executionStoreBytes" "storedBodyBytes" "executionTtlMs" "idempotencyBytes" "streamBufferBytes" "listPageBytes" "analyticsBytes" "streamsPerExecution" "streamsPerProcess")) | nindent 0 }}
{{- end -}}

{{/* The worker's env (deployment-worker.yaml). */}}
{{- define "hookgate.worker.env" -}}
{{- include "hookgate.commonEnv" . | nindent 0 }}
- name: HOOKGATE_WORKER_CONCURRENCY
  value: {{ .Values.worker.concurrency | int64 | quote }}
- name: HOOKGATE_WORKER_CLAIM_IDLE_MS
  value: {{ .Values.worker.claimIdleMs | int64 | quote }}
- name: HOOKGATE_QUEUE_SHARDS
  value: {{ .Values.config.queueShards | int64 | quote }}
{{- include "hookgate.tracing.env" . | nindent 0 }}
{{- include "hookgate.outboundEnv" . | nindent 0 }}
{{- include "hookgate.expressionEnv" . | nindent 0 }}
{{- include "hookgate.callbackSecret.env" . | nindent 0 }}
{{- include "hookgate.budgetEnv" (dict "ctx" . "keys" (list "executionStoreBytes" "storedBodyBytes" "executionTtlMs")) | nindent 0 }}
{{- end -}}

{{/*
Distributed tracing (config.tracing) for the processes that make spans: the gateways and
the workers. Only the standard OpenTelemetry variables; none when off, so the pods load
no tracing code. service.name stays the process's default, hookgate-<role>. The
exporters as the roles read OTEL_TRACES_EXPORTER (any case, blanks around, each once,
none adds nothing), set as the working ones; enabled with none of those is refused, not
rendered as a tracing that is off. The endpoint and the protocol only for otlp; the
protocol as the roles read OTEL_EXPORTER_OTLP_PROTOCOL (any case, blanks around; empty:
the roles' default, http/protobuf), unknown names refused; with grpc, an endpoint with a
path refused as the roles refuse it (OTLP/gRPC adds none and would ignore it).
*/}}
{{- define "hookgate.tracing.env" -}}
{{- with .Values.config.tracing }}
{{- if .enabled }}
{{- $exporters := list }}
{{- range .exporters }}
{{- $name := . | trim | lower }}
{{- /* The schema's (?i:) folds more than lower does (conſole, with a long s): its name is checked again. */}}
{{- if and $name (not (has $name (list "otlp" "console" "none"))) }}
{{- fail (printf "config.tracing.exporters: %q is not otlp, console or none as the roles read it" .) }}
{{- end }}
{{- if and $name (ne $name "none") }}
{{- $exporters = append $exporters $name }}
{{- end }}
{{- end }}
{{- $exporters = uniq $exporters }}
{{- if not $exporters }}
{{- fail "config.tracing.enabled needs otlp or console in config.tracing.exporters: none (or nothing) exports no span; set config.tracing.enabled=false for tracing off" }}
{{- end }}
{{- $otlp := has "otlp" $exporters }}
{{- if and $otlp (not .endpoint) }}
{{- fail "config.tracing.enabled needs config.tracing.endpoint, the collector's OTLP URL (e.g. http://otel-collector.observability:4318, or its gRPC port 4317 with protocol grpc), with otlp in config.tracing.exporters" }}
{{- end }}
{{- $protocol := .protocol | default "" | toString | trim | lower }}
{{- if and $otlp $protocol (not (has $protocol (list "http/protobuf" "http/json" "grpc"))) }}
{{- fail (printf "config.tracing.protocol must be http/protobuf, http/json or grpc, not %q" (.protocol | toString | trim)) }}
{{- end }}
{{- if and $otlp (eq $protocol "grpc") }}
{{- $url := urlParse .endpoint }}
{{- if or (not (has $url.path (list "" "/"))) $url.query $url.fragment $url.userinfo }}
{{- fail (printf "config.tracing.endpoint must be the collector's address without a path or query for grpc (e.g. http://collector:4317), not %q" .endpoint) }}
{{- end }}
{{- /* gRPC's default port is 443 whatever the scheme: plaintext names its port (not 80). */}}
{{- if and (eq $url.scheme "http") (or (not (regexMatch ":[0-9]+$" $url.host)) (hasSuffix ":80" $url.host)) }}
{{- fail (printf "config.tracing.endpoint must name the collector's port for plaintext grpc (gRPC's default is 443), e.g. http://collector:4317, not %q" .endpoint) }}
{{- end }}
{{- end }}
- name: OTEL_TRACES_EXPORTER
  value: {{ join "," $exporters | quote }}
{{- if $otlp }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .endpoint | quote }}
{{- if $protocol }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ $protocol | quote }}
{{- end }}
{{- end }}
- name: OTEL_TRACES_SAMPLER
  value: {{ .sampler | quote }}
{{- if hasSuffix "traceidratio" .sampler }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ .samplerRatio | toString | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
The secrets that sign Async Callbacks (config.callbackSecret), for the processes that
send them: the workers, and gateways running executions inline. The Secret's key holds
one whsec_ secret per line, mounted as a file.
*/}}
{{- define "hookgate.callbackSecret.env" -}}
{{- if .Values.config.callbackSecret.name }}
- name: HOOKGATE_CALLBACK_SECRET_FILE
  value: /var/run/hookgate/callbacks/secrets
{{- end }}
{{- end -}}

{{- define "hookgate.callbackSecret.volumeMounts" -}}
{{- if .Values.config.callbackSecret.name }}
- name: callback-secret
  mountPath: /var/run/hookgate/callbacks
  readOnly: true
{{- end }}
{{- end -}}

{{- define "hookgate.callbackSecret.volumes" -}}
{{- if .Values.config.callbackSecret.name }}
- name: callback-secret
  secret:
    secretName: {{ .Values.config.callbackSecret.name }}
    items:
      - key: {{ .Values.config.callbackSecret.key }}
        path: secrets
{{- end }}
{{- end -}}

{{/* The operator's env (deployment-operator.yaml). */}}
{{- define "hookgate.operator.env" -}}
{{- include "hookgate.commonEnv" . | nindent 0 }}
- name: HOOKGATE_LEADER_ELECTION
  value: {{ .Values.operator.leaderElection.enabled | quote }}
- name: HOOKGATE_LEASE_NAME
  value: {{ default (include "hookgate.componentName" (dict "ctx" . "component" "operator")) .Values.operator.leaderElection.leaseName | quote }}
- name: HOOKGATE_LEASE_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
# The leader-election identity.
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- with .Values.rbac.secretNamespaces }}
- name: HOOKGATE_SECRET_NAMESPACES
  value: {{ join "," . | quote }}
{{- end }}
{{- with .Values.operator.nodeOptions }}
- name: NODE_OPTIONS
  value: {{ . | quote }}
{{- end }}
{{- end -}}
