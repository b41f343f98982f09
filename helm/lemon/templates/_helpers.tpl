{{/* Names, labels and shared pieces of the lemon chart. */}}

{{- define "lemon.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* <release>-<chart>, or <release> when it already contains the chart name; 63 chars max. */}}
{{- define "lemon.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* "<fullname>-<component>" trimmed so that the suffix always survives. */}}
{{- define "lemon.componentName" -}}
{{- $root := index . 0 }}{{- $component := index . 1 -}}
{{- printf "%s-%s" (include "lemon.fullname" $root | trunc (int (sub 62 (len $component))) | trimSuffix "-") $component }}
{{- end }}

{{- define "lemon.labels" -}}
{{- $root := index . 0 }}{{- $component := index . 1 -}}
helm.sh/chart: {{ printf "%s-%s" $root.Chart.Name $root.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
app.kubernetes.io/part-of: lemon
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
{{ include "lemon.selectorLabels" . }}
{{- with $root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "lemon.selectorLabels" -}}
{{- $root := index . 0 }}{{- $component := index . 1 -}}
app.kubernetes.io/name: {{ include "lemon.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ $component }}
{{- end }}

{{/* The image of a component: <repository>:<tag>, the tag defaulting to the appVersion. */}}
{{- define "lemon.image" -}}
{{- $root := index . 0 }}{{- $image := index . 1 -}}
{{- printf "%s:%s" $image.repository (default $root.Chart.AppVersion $image.tag) }}
{{- end }}

{{- define "lemon.serviceAccountName" -}}
{{- $root := index . 0 }}{{- $component := index . 1 -}}
{{- $account := (index $root.Values $component).serviceAccount }}
{{- if $account.name }}{{ $account.name }}{{- else if $account.create }}{{ include "lemon.componentName" (list $root $component) }}{{- else }}default{{- end }}
{{- end }}

{{/* Pod-level settings both Deployments share. */}}
{{- define "lemon.podCommon" -}}
{{- $root := index . 0 }}{{- $values := index . 1 -}}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
{{- with $values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Pod annotations for Prometheus' annotation-based discovery, when metrics are on. */}}
{{- define "lemon.metricsAnnotations" -}}
{{- $root := index . 0 }}{{- $port := index . 1 -}}
{{- if $root.Values.metrics.enabled }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ $port | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end }}
