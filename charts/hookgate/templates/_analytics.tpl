{{/*
Where the gateways' analytics API reads from (roles/analytics-settings.ts): the
HOOKGATE_ANALYTICS and HOOKGATE_PROMETHEUS_* environment, the token and CA mounted as
files. Fails the render with what to change when the values contradict each other.
*/}}
{{- define "hookgate.analytics.check" -}}
{{- $a := .Values.analytics -}}
{{- $p := $a.prometheus -}}
{{- if and (eq $a.backend "prometheus") (not $p.url) -}}
{{- fail "analytics.backend=prometheus needs analytics.prometheus.url" -}}
{{- end -}}
{{- if and $p.existingSecret $p.basicAuth.existingSecret -}}
{{- fail "analytics.prometheus.existingSecret (bearer token) and analytics.prometheus.basicAuth.existingSecret exclude each other" -}}
{{- end -}}
{{- end -}}

{{/* True (non-empty) when the gateways read analytics from Prometheus. */}}
{{- define "hookgate.analytics.prometheus" -}}
{{- $a := .Values.analytics -}}
{{- if or (eq $a.backend "prometheus") (and (ne $a.backend "memory") $a.prometheus.url) -}}true{{- end -}}
{{- end -}}

{{- define "hookgate.analytics.env" -}}
{{- include "hookgate.analytics.check" . -}}
{{- $p := .Values.analytics.prometheus -}}
- name: HOOKGATE_ANALYTICS
  value: {{ ternary "prometheus" "memory" (eq (include "hookgate.analytics.prometheus" .) "true") | quote }}
{{- if include "hookgate.analytics.prometheus" . }}
- name: HOOKGATE_PROMETHEUS_URL
  value: {{ $p.url | quote }}
- name: HOOKGATE_PROMETHEUS_TIMEOUT_MS
  value: {{ $p.timeoutMs | int64 | quote }}
{{- with $p.selector }}
- name: HOOKGATE_PROMETHEUS_SELECTOR
  value: {{ . | quote }}
{{- end }}
{{- if $p.existingSecret }}
- name: HOOKGATE_PROMETHEUS_TOKEN_FILE
  value: /var/run/hookgate/prometheus-auth/{{ $p.tokenKey }}
{{- end }}
{{- if $p.basicAuth.existingSecret }}
- name: HOOKGATE_PROMETHEUS_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ $p.basicAuth.existingSecret }}
      key: username
- name: HOOKGATE_PROMETHEUS_PASSWORD_FILE
  value: /var/run/hookgate/prometheus-auth/password
{{- end }}
{{- if $p.caConfigMap }}
- name: HOOKGATE_PROMETHEUS_CA_FILE
  value: /var/run/hookgate/prometheus-ca/{{ $p.caKey }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The token or password Secret and the CA ConfigMap, read-only. */}}
{{- define "hookgate.analytics.volumeMounts" -}}
{{- $p := .Values.analytics.prometheus -}}
{{- if include "hookgate.analytics.prometheus" . }}
{{- if or $p.existingSecret $p.basicAuth.existingSecret }}
- name: prometheus-auth
  mountPath: /var/run/hookgate/prometheus-auth
  readOnly: true
{{- end }}
{{- if $p.caConfigMap }}
- name: prometheus-ca
  mountPath: /var/run/hookgate/prometheus-ca
  readOnly: true
{{- end }}
{{- end }}
{{- end -}}

{{- define "hookgate.analytics.volumes" -}}
{{- $p := .Values.analytics.prometheus -}}
{{- if include "hookgate.analytics.prometheus" . }}
{{- if $p.existingSecret }}
- name: prometheus-auth
  secret:
    secretName: {{ $p.existingSecret }}
    items:
      - key: {{ $p.tokenKey }}
        path: {{ $p.tokenKey }}
{{- else if $p.basicAuth.existingSecret }}
- name: prometheus-auth
  secret:
    secretName: {{ $p.basicAuth.existingSecret }}
    items:
      - key: password
        path: password
{{- end }}
{{- if $p.caConfigMap }}
- name: prometheus-ca
  configMap:
    name: {{ $p.caConfigMap }}
    items:
      - key: {{ $p.caKey }}
        path: {{ $p.caKey }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Label matchers of the recording rules' selectors: `{<selector>}` or nothing. */}}
{{- define "hookgate.analytics.matchers" -}}
{{- with .Values.analytics.prometheus.selector }}{{ printf "{%s}" . }}{{- end -}}
{{- end -}}
