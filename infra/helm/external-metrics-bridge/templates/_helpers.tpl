{{/* Name of every object of the release: fullnameOverride, else service.name. */}}
{{- define "emb.name" -}}
{{- default .Values.service.name .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "emb.labels" -}}
app.kubernetes.io/name: external-metrics-bridge-proxy
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: proxy
app.kubernetes.io/part-of: external-metrics-bridge
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
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
{{- fail (printf "tls.mode=existing with registration.selfRegister=false: nothing writes the APIService's caBundle. Set registration.caBundle to the PEM CA that signed tls.crt, or create Secret %s/%s with ca.crt before installing (the chart reads it at install; helm template cannot)" .Release.Namespace .Values.tls.secretName) -}}
{{- end -}}
{{- $ca -}}
{{- end -}}
{{- end -}}

{{/* Pod labels: the chart's labels plus podLabels. */}}
{{- define "emb.podLabels" -}}
{{ include "emb.labels" . }}
{{- with .Values.podLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Whether the chart renders a PodDisruptionBudget ("true" or empty): podDisruptionBudget.enabled, or when it is null (the default) only with more than one replica (a PDB with minAvailable 1 over one replica blocks every node drain). */}}
{{- define "emb.pdbEnabled" -}}
{{- $e := .Values.podDisruptionBudget.enabled -}}
{{- if kindIs "bool" $e }}{{ if $e }}true{{ end }}{{ else if gt (int .Values.replicas) 1 }}true{{ end -}}
{{- end -}}

{{/* Whether Prometheus scrapes the proxy (a ServiceMonitor; metricsReaders is then required). */}}
{{- define "emb.scraped" -}}
{{- if .Values.serviceMonitor.enabled }}true{{ end -}}
{{- end -}}
