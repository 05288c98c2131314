{{/*
The egress NetworkPolicies (networkPolicy.egress; networkpolicy-egress.yaml): what each
role may connect to, the checks of the values, and the rules shared between roles. Why
the API server's address is asked for rather than guessed:
docs/adr/0031-egress-policy-asks-for-the-api-server.md.
*/}}

{{/*
The public internet as NetworkPolicy ipBlocks: everything except the ranges the outbound
guard (runtime/engine/outbound/policy.ts) treats as not public or never reachable: RFC
1918, CGNAT 100.64/10, loopback, link-local (cloud metadata 169.254.169.254), Azure's
WireServer 168.63.129.16, the unspecified 0.0.0.0/8 and ::, unique-local fc00::/7,
fe80::/10, ::1, and the IPv4 ones as NAT64 and 6to4 addresses embed them
(test/charts/egress.test.ts holds the lists together). Multicast, reserved and
documentation ranges are left to the guard. The cluster's
pod and Service ranges sit in the private ones on almost every cluster; a cluster on
public addresses must name them in outbound.deny (the guard stays the first line).
*/}}
{{- define "hookgate.egress.internetPeers" -}}
- ipBlock:
    cidr: 0.0.0.0/0
    except:
      - 0.0.0.0/8
      - 10.0.0.0/8
      - 100.64.0.0/10
      - 127.0.0.0/8
      - 168.63.129.16/32
      - 169.254.0.0/16
      - 172.16.0.0/12
      - 192.168.0.0/16
- ipBlock:
    cidr: ::/0
    except:
      - ::/128
      - ::1/128
      - fc00::/7
      - fe80::/10
      # The ranges above as NAT64 (64:ff9b::/96) and 6to4 (2002::/16) addresses carry them.
      - 64:ff9b::/104
      - 64:ff9b::a00:0/104
      - 64:ff9b::6440:0/106
      - 64:ff9b::7f00:0/104
      - 64:ff9b::a83f:8110/128
      - 64:ff9b::a9fe:0/112
      - 64:ff9b::ac10:0/108
      - 64:ff9b::c0a8:0/112
      - 2002::/24
      - 2002:a00::/24
      - 2002:6440::/26
      - 2002:7f00::/24
      - 2002:a83f:8110::/48
      - 2002:a9fe::/32
      - 2002:ac10::/28
      - 2002:c0a8::/32
{{- end -}}

{{/*
"" when . is a CIDR as NetworkPolicy ipBlocks take it (address/prefix; IPv4 dotted quad
with prefix 0-32, or IPv6 in hex groups with at most one "::" and prefix 0-128), else
why not.
*/}}
{{- define "hookgate.cidrProblem" -}}
{{- $s := toString . -}}
{{- $parts := splitList "/" $s -}}
{{- if ne (len $parts) 2 -}}
needs an address and a prefix length, e.g. 10.0.0.1/32
{{- else -}}
{{- $addr := index $parts 0 -}}
{{- $prefix := index $parts 1 -}}
{{- $octet := "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])" -}}
{{- if not (regexMatch "^(0|[1-9][0-9]{0,2})$" $prefix) -}}
has no valid prefix length after the /
{{- else if regexMatch (printf "^(%s\\.){3}%s$" $octet $octet) $addr -}}
{{- if gt (atoi $prefix) 32 -}}has a prefix longer than 32{{- end -}}
{{- else if regexMatch "^[0-9A-Fa-f:]+$" $addr -}}
{{- $groups := splitList ":" $addr -}}
{{- $filled := 0 -}}
{{- $bad := false -}}
{{- range $groups -}}
{{- if . -}}
{{- $filled = add1 $filled -}}
{{- if gt (len .) 4 }}{{ $bad = true }}{{ end -}}
{{- end -}}
{{- end -}}
{{- $double := len (regexFindAll "::" $addr -1) -}}
{{- if or $bad (contains ":::" $addr) (gt $double 1) (regexMatch "^:[^:]|[^:]:$" $addr) -}}
is not an IPv6 address
{{- else if and (eq $double 0) (ne $filled 8) -}}
is not an IPv6 address (8 groups, or fewer with ::)
{{- else if and (eq $double 1) (gt $filled 7) -}}
is not an IPv6 address (too many groups)
{{- else if gt (atoi $prefix) 128 -}}
has a prefix longer than 128
{{- end -}}
{{- else -}}
is not an IPv4 or IPv6 address
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Fails the render when the CIDR .cidr is malformed; .at names the value. */}}
{{- define "hookgate.cidrCheck" -}}
{{- with include "hookgate.cidrProblem" .cidr -}}
{{- fail (printf "%s: %q %s" $.at (toString $.cidr) .) -}}
{{- end -}}
{{- end -}}

{{/*
Fails the render when a list of NetworkPolicy peers (.peers, at the value .at) holds a
peer Kubernetes would refuse or one that means something else than it looks: an empty
peer, an ipBlock beside selectors, a malformed CIDR.
*/}}
{{- define "hookgate.egress.peersCheck" -}}
{{- range $i, $peer := .peers -}}
{{- $at := printf "%s[%d]" $.at $i -}}
{{- if not $peer -}}
{{- fail (printf "%s is an empty peer: give an ipBlock, a podSelector and/or a namespaceSelector" $at) -}}
{{- end -}}
{{- if and $peer.ipBlock (or (hasKey $peer "podSelector") (hasKey $peer "namespaceSelector")) -}}
{{- fail (printf "%s has an ipBlock and a selector: a peer is either an ipBlock or selectors; make them two peers" $at) -}}
{{- end -}}
{{- with $peer.ipBlock -}}
{{- include "hookgate.cidrCheck" (dict "at" (printf "%s.ipBlock.cidr" $at) "cidr" .cidr) -}}
{{- range $j, $except := .except -}}
{{- include "hookgate.cidrCheck" (dict "at" (printf "%s.ipBlock.except[%d]" $at $j) "cidr" $except) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Every check of networkPolicy.egress, across keys: fails the render saying what to set.
*/}}
{{- define "hookgate.egress.check" -}}
{{- $np := .Values.networkPolicy -}}
{{- $e := $np.egress -}}
{{- if not $np.enabled -}}
{{- fail "networkPolicy.egress.enabled needs networkPolicy.enabled=true: the egress policies complete the ingress ones (and the chart's Redis policy, which allows Redis no egress at all)" -}}
{{- end -}}
{{- if not $e.dns.to -}}
{{- fail "networkPolicy.egress.dns.to is empty: no pod could resolve a name (Redis, the API server, callback hosts). Name the cluster DNS pods, e.g. the default namespaceSelector kubernetes.io/metadata.name=kube-system with podSelector k8s-app=kube-dns" -}}
{{- end -}}
{{- include "hookgate.egress.peersCheck" (dict "at" "networkPolicy.egress.dns.to" "peers" $e.dns.to) -}}
{{- $api := $e.apiServer -}}
{{- if and $api.omit $api.cidrs -}}
{{- fail "networkPolicy.egress.apiServer: set cidrs or omit, not both" -}}
{{- end -}}
{{- if and (not $api.omit) (not $api.cidrs) -}}
{{- fail "networkPolicy.egress.apiServer.cidrs is required with networkPolicy.egress.enabled: the operator (and the gateway with admin.auth kubernetes) talks to the Kubernetes API server, whose address no pod selector matches and the chart cannot guess. List its endpoints as CIDRs: `kubectl get endpoints kubernetes -n default` (e.g. 172.18.0.2:6443 -> apiServer.cidrs={172.18.0.2/32}, apiServer.ports={6443}). Or set apiServer.omit=true when a policy of your own allows it (e.g. Cilium toEntities: kube-apiserver); see the chart README, \"Egress\"" -}}
{{- end -}}
{{- range $i, $cidr := $api.cidrs -}}
{{- include "hookgate.cidrCheck" (dict "at" (printf "networkPolicy.egress.apiServer.cidrs[%d]" $i) "cidr" $cidr) -}}
{{- end -}}
{{- $redis := $e.externalRedis -}}
{{- if .Values.redis.enabled -}}
{{- if $redis.to -}}
{{- fail "networkPolicy.egress.externalRedis.to is set but the chart runs its own Redis (redis.enabled), which the policies reach by its pod labels: unset it, or set redis.enabled=false to use externalRedis" -}}
{{- end -}}
{{- else if not $redis.to -}}
{{- fail "networkPolicy.egress.externalRedis.to is required with externalRedis and networkPolicy.egress.enabled: the chart cannot derive your Redis' address. List it as peers, e.g. an ipBlock (externalRedis.to[0].ipBlock.cidr=10.1.2.3/32) or the selectors of an in-cluster Redis, and its ports in externalRedis.ports" -}}
{{- end -}}
{{- include "hookgate.egress.peersCheck" (dict "at" "networkPolicy.egress.externalRedis.to" "peers" $redis.to) -}}
{{- if include "hookgate.analytics.prometheus" . -}}
{{- if not $e.prometheus.to -}}
{{- fail (printf "networkPolicy.egress.prometheus.to is required with networkPolicy.egress.enabled and analytics from Prometheus (%s): the gateways query it, and an in-cluster Prometheus is on a private address the policies do not open. List it as peers, e.g. namespaceSelector kubernetes.io/metadata.name=monitoring with podSelector app.kubernetes.io/name=prometheus, and its pods' port in prometheus.ports" .Values.analytics.prometheus.url) -}}
{{- end -}}
{{- end -}}
{{- include "hookgate.egress.peersCheck" (dict "at" "networkPolicy.egress.prometheus.to" "peers" $e.prometheus.to) -}}
{{- range $i, $rule := $e.outboundRules -}}
{{- if not $rule.to -}}
{{- fail (printf "networkPolicy.egress.outboundRules[%d] has no `to`: an egress rule without peers allows every destination. Name the destinations (ipBlock or selectors); for every public address the internet rule is already there" $i) -}}
{{- end -}}
{{- include "hookgate.egress.peersCheck" (dict "at" (printf "networkPolicy.egress.outboundRules[%d].to" $i) "peers" $rule.to) -}}
{{- end -}}
{{- end -}}

{{/* TCP ports (a list of numbers) as NetworkPolicy ports. */}}
{{- define "hookgate.egress.tcpPorts" -}}
{{- range . }}
- port: {{ int . }}
  protocol: TCP
{{- end }}
{{- end -}}

{{/*
The egress rules of one role (.role: operator, gateway or worker), as a YAML list.
*/}}
{{- define "hookgate.egress.rules" -}}
{{- $root := .ctx -}}
{{- $role := .role -}}
{{- $e := $root.Values.networkPolicy.egress -}}
# DNS: the cluster's resolver, UDP and TCP.
- to:
    {{- toYaml $e.dns.to | nindent 4 }}
  ports:
    {{- range $e.dns.ports }}
    - port: {{ int . }}
      protocol: UDP
    - port: {{ int . }}
      protocol: TCP
    {{- end }}
# Redis: routes, the workflow registry, the execution queue.
{{- if $root.Values.redis.enabled }}
- to:
    - podSelector:
        matchLabels:
          {{- include "hookgate.selectorLabels" (dict "ctx" $root "component" "redis") | nindent 10 }}
  ports:
    - port: 6379
      protocol: TCP
{{- else }}
- to:
    {{- toYaml $e.externalRedis.to | nindent 4 }}
  ports:
    {{- include "hookgate.egress.tcpPorts" $e.externalRedis.ports | trim | nindent 4 }}
{{- end }}
{{- if and (or (eq $role "operator") (and (eq $role "gateway") (eq $root.Values.admin.auth "kubernetes"))) (not $e.apiServer.omit) }}
# The Kubernetes API server: {{ ternary "watches, status, Lease, Events" "TokenReview and SubjectAccessReview of admin requests" (eq $role "operator") }}.
- to:
    {{- range $e.apiServer.cidrs }}
    - ipBlock:
        cidr: {{ . }}
    {{- end }}
  ports:
    {{- include "hookgate.egress.tcpPorts" $e.apiServer.ports | trim | nindent 4 }}
{{- end }}
{{- if and (eq $role "gateway") (include "hookgate.analytics.prometheus" $root) }}
# Prometheus: the analytics API's queries.
- to:
    {{- toYaml $e.prometheus.to | nindent 4 }}
  ports:
    {{- include "hookgate.egress.tcpPorts" $e.prometheus.ports | trim | nindent 4 }}
{{- end }}
{{- if ne $role "operator" }}
{{- if eq $role "worker" }}
# The public internet: http nodes and Async Callbacks.
{{- else if eq $root.Values.gateway.executions "inline" }}
# The public internet: http nodes and Async Callbacks (inline executions), JWKS and OAuth2
# token introspection of bearer and oauth2 triggers.
{{- else }}
# The public internet: JWKS and OAuth2 token introspection of bearer and oauth2 triggers
# (the workers run the executions).
{{- end }}
- to:
    {{- include "hookgate.egress.internetPeers" $root | nindent 4 }}
  {{- with $e.internet.ports }}
  ports:
    {{- include "hookgate.egress.tcpPorts" . | trim | nindent 4 }}
  {{- end }}
{{- with $e.outboundRules }}
# networkPolicy.egress.outboundRules: in-cluster destinations outbound.allow opens, in-cluster
# identity providers.
{{- toYaml . | nindent 0 }}
{{- end }}
{{- end }}
{{- end -}}
