{{/* Name of every object of the release. */}}
{{- define "emb.name" -}}
{{- .Values.service.name | trunc 63 | trimSuffix "-" -}}
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
