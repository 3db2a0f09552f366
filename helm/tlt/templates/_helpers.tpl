{{/* Names and labels shared by every template of the tlt chart. */}}

{{/* The chart name, or nameOverride. */}}
{{- define "tlt.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* "<release>-tlt" (or fullnameOverride), cut to the 63 characters of a DNS label. */}}
{{- define "tlt.fullname" -}}
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

{{/* The operator's objects: "<fullname>-operator". */}}
{{- define "tlt.operatorName" -}}
{{- printf "%s-operator" (include "tlt.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tlt.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "tlt.operatorName" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name must name an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Labels that never change for the life of a release (Deployment selector). */}}
{{- define "tlt.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tlt.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{/* Labels on every object. */}}
{{- define "tlt.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "tlt.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tlt
{{- end -}}

{{/* The image reference: repository:tag, the tag defaulting to appVersion. */}}
{{- define "tlt.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The job pods' image (--runtime-image), the tag defaulting to appVersion. */}}
{{- define "tlt.runtimeImage" -}}
{{- printf "%s:%s" .Values.runtimeImage.repository (default .Chart.AppVersion .Values.runtimeImage.tag) -}}
{{- end -}}
