{{/* Name of every object of the release: fullnameOverride, else service.name. */}}
{{- define "emb.name" -}}
{{- default .Values.service.name .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels on every object: the chart's, then commonLabels (the chart's win on a clash). */}}
{{- define "emb.labels" -}}
{{- $fixed := dict
  "app.kubernetes.io/name" "external-metrics-bridge-proxy"
  "app.kubernetes.io/instance" .Release.Name
  "app.kubernetes.io/version" .Chart.AppVersion
  "app.kubernetes.io/component" "proxy"
  "app.kubernetes.io/part-of" "external-metrics-bridge"
  "app.kubernetes.io/managed-by" .Release.Service
  "helm.sh/chart" (printf "%s-%s" .Chart.Name .Chart.Version) -}}
{{- toYaml (merge $fixed (.Values.commonLabels | default dict)) -}}
{{- end -}}

{{/*
metadata.annotations of an object: commonAnnotations plus `extra` (a dict,
winning on a clash), or nothing when both are empty. Call with
(dict "root" $ "extra" (dict …)); use as
{{- with include "emb.annotations" (dict "root" .) }}{{ . | nindent 2 }}{{ end }}
*/}}
{{- define "emb.annotations" -}}
{{- $a := merge (dict) (.extra | default dict) (.root.Values.commonAnnotations | default dict) -}}
{{- if $a -}}
annotations:
  {{- toYaml $a | nindent 2 }}
{{- end -}}
{{- end -}}

{{/* The proxy's image: [registry/]repository:tag, or @digest when image.digest is set. */}}
{{- define "emb.image" -}}
{{- $repo := .Values.image.repository -}}
{{- with .Values.image.registry }}{{ $repo = printf "%s/%s" . $repo }}{{ end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo .Values.image.tag -}}
{{- end -}}
{{- end -}}

{{/* The proxy's ServiceAccount: serviceAccount.name, else the release's name. */}}
{{- define "emb.serviceAccountName" -}}
{{- default (include "emb.name" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* Replicas: replicaCount when set (an alias), else replicas. */}}
{{- define "emb.replicas" -}}
{{- if kindIs "invalid" .Values.replicaCount }}{{ int .Values.replicas }}{{ else }}{{ int .Values.replicaCount }}{{ end -}}
{{- end -}}

{{/* Labels that select the proxy's pods. */}}
{{- define "emb.selectorLabels" -}}
app.kubernetes.io/name: external-metrics-bridge-proxy
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The ProxyConfig document (functions/proxy/config.ts). */}}
{{- define "emb.proxyConfig" -}}
apiVersion: external-metrics-bridge.io/v1alpha1
kind: ProxyConfig
backends:
{{- range $name, $b := .Values.backends }}
  {{ $name }}:
{{ toYaml $b | indent 4 }}
{{- end }}
{{- if .Values.inProcessBridge.enabled }}
  inprocess:
    type: inProcess
    bridgeConfig: /etc/external-metrics-bridge/config/bridge.yaml
    timeoutSeconds: {{ .Values.inProcessBridge.timeoutSeconds }}
{{- end }}
routes:
{{- if .Values.routes }}
{{ toYaml .Values.routes | indent 2 }}
{{- else }} []
{{- end }}
{{- with .Values.passthrough }}
passthrough: {{ . | quote }}
{{- end }}
cache:
{{ toYaml .Values.cache | indent 2 }}
discovery:
{{ toYaml .Values.discovery | indent 2 }}
clusterPolicies:
{{ toYaml .Values.clusterPolicies | indent 2 }}
{{- with .Values.customMetrics }}
customMetrics:
{{ toYaml (omit . "objectResources") | indent 2 }}
{{- end }}
{{- if .Values.admission.enabled }}
admission:
  mode: {{ .Values.admission.mode }}
  {{- if .Values.admission.clientCA.configMap }}
  clientCA: /etc/external-metrics-bridge/admission-client-ca/{{ .Values.admission.clientCA.key }}
  {{- end }}
{{- end }}
{{- end -}}

{{/* Whether any backend is a signed bridge backend (the signing Secret is then required). */}}
{{- define "emb.hasBridge" -}}
{{- range $name, $b := .Values.backends }}{{ if eq (default "bridge" $b.type) "bridge" }}true{{ end }}{{ end -}}
{{- end -}}

{{/* Whether any backend is a pass-through adapter (the proxy then reads external metrics itself). */}}
{{- define "emb.hasPassthrough" -}}
{{- range $name, $b := .Values.backends }}{{ if eq (default "bridge" $b.type) "passthrough" }}true{{ end }}{{ end -}}
{{- end -}}

{{/* Whether the proxy writes the APIService itself ("true" or empty): never in cert-manager mode (cainjector fills caBundle). */}}
{{- define "emb.selfRegister" -}}
{{- if and .Values.registration.selfRegister (ne .Values.tls.mode "certManager") }}true{{ end -}}
{{- end -}}

{{/* The cert-manager Certificate of the serving certificate (tls.mode certManager). */}}
{{- define "emb.servingCertificate" -}}
{{- printf "%s-serving" (include "emb.name" .) -}}
{{- end -}}


{{/*
The APIService's and webhooks' caBundle (base64 of PEM) the chart renders, or
empty: registration.caBundle when given; else, with tls.mode existing and no
self-registration (nobody else writes it), the ca.crt of the existing Secret
read from the cluster (helm install/upgrade; `lookup` is empty offline), and
a clear failure when neither is there: an APIService without caBundle fails
the aggregator's discovery check (FailedDiscoveryCheck).
*/}}
{{- define "emb.caBundle" -}}
{{- if .Values.registration.caBundle -}}
{{- .Values.registration.caBundle | b64enc -}}
{{- else if and (eq .Values.tls.mode "existing") (not (include "emb.selfRegister" .)) -}}
{{- $secret := lookup "v1" "Secret" .Release.Namespace .Values.tls.secretName -}}
{{- $ca := dig "data" "ca.crt" "" ($secret | default dict) -}}
{{- if not $ca -}}
{{- fail (include "emb.caBundleMissing" .) -}}
{{- end -}}
{{- $ca -}}
{{- end -}}
{{- end -}}

{{/* The refusal of tls.mode existing without self-registration and without a CA (emb.caBundle, emb.checks). */}}
{{- define "emb.caBundleMissing" -}}
{{- printf "tls.mode=existing with registration.selfRegister=false: nothing writes the APIService's caBundle. Set registration.caBundle to the PEM CA that signed tls.crt, or create Secret %s/%s with ca.crt before installing (the chart reads it at install; helm template cannot)" .Release.Namespace .Values.tls.secretName -}}
{{- end -}}

{{/* Pod labels: the chart's labels (commonLabels included) plus podLabels. */}}
{{- define "emb.podLabels" -}}
{{- toYaml (merge (dict) (include "emb.labels" . | fromYaml) (.Values.podLabels | default dict)) -}}
{{- end -}}

{{/* Whether the chart renders a PodDisruptionBudget ("true" or empty): podDisruptionBudget.enabled, or when it is null (the default) only with more than one replica (a PDB with minAvailable 1 over one replica blocks every node drain). */}}
{{- define "emb.pdbEnabled" -}}
{{- $e := .Values.podDisruptionBudget.enabled -}}
{{- if kindIs "bool" $e }}{{ if $e }}true{{ end }}{{ else if gt (int (include "emb.replicas" .)) 1 }}true{{ end -}}
{{- end -}}

{{/* Whether Prometheus scrapes the proxy (a ServiceMonitor). */}}
{{- define "emb.scraped" -}}
{{- if .Values.serviceMonitor.enabled }}true{{ end -}}
{{- end -}}

{{/* The chart's scraper ServiceAccount ("" when the ServiceMonitor is off or uses an existing Secret's token). */}}
{{- define "emb.scraper" -}}
{{- if and .Values.serviceMonitor.enabled (not .Values.serviceMonitor.credentials.secretName) }}{{ printf "%s-metrics-scraper" (include "emb.name" .) | trunc 63 | trimSuffix "-" }}{{ end -}}
{{- end -}}

{{/*
Refuse a combination of values (the argument: the message). `fail` stops
helm install, upgrade and template. helm lint renders with `fail` switched
off (Helm's engine in LintMode: "Don't fail when linting"), so the text
after it, reached only under lint, is a document named by the message that
helm lint --strict refuses ("object name does not conform to Kubernetes
naming requirements: \"refused: …\""): lint refuses what install refuses.
Used by emb.checks only (templates/checks.yaml), where it is a document of its own.
*/}}
{{- define "emb.refuse" -}}
{{- fail . }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ printf "refused: %s" . | quote }}
{{- end -}}

{{/*
Checks of combinations of values the schema cannot express, so that what
installs is a proxy that starts (shared/proxy/config.ts loads its ProxyConfig)
and is reachable: every route names a backend, the pass-through backend
exists and has type passthrough, some route or the pass-through serves
metrics, the in-process bridge's backend name is free; a ServiceMonitor
sending an existing Secret's token names that token's ServiceAccount in
metricsReaders; tls.mode existing without self-registration has a CA for
caBundle.
*/}}
{{- define "emb.checks" -}}
{{- /* backends=null (--set-json) removes the key: no backends, not an error */ -}}
{{- $backends := .Values.backends | default dict -}}
{{- $names := keys $backends -}}
{{- if .Values.inProcessBridge.enabled }}{{ $names = append $names "inprocess" }}{{ end -}}
{{- if and .Values.inProcessBridge.enabled (hasKey $backends "inprocess") }}
{{ include "emb.refuse" "backends.inprocess: the name is taken by inProcessBridge.enabled (the chart renders that backend)" }}
{{- end -}}
{{- range $i, $r := .Values.routes -}}
{{- if not (has $r.backend $names) }}
{{ include "emb.refuse" (printf "routes[%d].backend %s: no such backend (backends: %s)" $i $r.backend (join ", " (sortAlpha $names))) }}
{{- end -}}
{{- end -}}
{{- with .Values.passthrough -}}
{{- $b := get $backends . -}}
{{- if not $b }}
{{ include "emb.refuse" (printf "passthrough %s: no such backend in backends" .) }}
{{- else if ne (default "bridge" $b.type) "passthrough" }}
{{ include "emb.refuse" (printf "passthrough %s: the pass-through backend must have type passthrough (it would receive every unclaimed metric signed)" .) }}
{{- end -}}
{{- end -}}
{{- if and (not .Values.routes) (not .Values.passthrough) }}
{{ include "emb.refuse" "routes is empty and passthrough is empty: no metric could be served" }}
{{- end -}}
{{- if and (include "emb.scraped" .) .Values.serviceMonitor.credentials.secretName (not .Values.metricsReaders) }}
{{ include "emb.refuse" (printf "serviceMonitor.credentials.secretName %s: set metricsReaders to the ServiceAccount whose token that Secret holds (namespace/name) so it may GET /metrics, or leave secretName empty for the chart's scraper ServiceAccount" .Values.serviceMonitor.credentials.secretName) }}
{{- end -}}
{{- if and (eq .Values.tls.mode "existing") (not (include "emb.selfRegister" .)) (not (include "emb.caBundle" .)) }}
{{ include "emb.refuse" (include "emb.caBundleMissing" .) }}
{{- end -}}
{{- end -}}


{{/* The APIServices the chart renders and the proxy registers: External always; v1beta2 and v1beta1 of custom.metrics.k8s.io with customMetrics.enabled (priorities as prometheus-adapter's chart). A JSON list of {group, version, versionPriority}. */}}
{{- define "emb.apiServices" -}}
{{- $list := list (dict "group" "external.metrics.k8s.io" "version" "v1beta1" "groupPriorityMinimum" .Values.registration.groupPriorityMinimum "versionPriority" .Values.registration.versionPriority) -}}
{{- if (.Values.customMetrics | default dict).enabled -}}
{{- $list = append $list (dict "group" "custom.metrics.k8s.io" "version" "v1beta2" "groupPriorityMinimum" 100 "versionPriority" 200) -}}
{{- $list = append $list (dict "group" "custom.metrics.k8s.io" "version" "v1beta1" "groupPriorityMinimum" 100 "versionPriority" 100) -}}
{{- end -}}
{{- toJson $list -}}
{{- end -}}
