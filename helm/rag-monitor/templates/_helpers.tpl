{{/*
Helpers take a context with .Values, .Release and .Chart. Inside this chart
that is the root context; `rag-monitor.sidecarContainer` builds one from the
parent chart's root context and its `rag-monitor` values, so names resolve the
same from both places. The default name is the literal "rag-monitor" (not
.Chart.Name, which is the parent's name when used from a parent chart).
*/}}

{{- define "rag-monitor.name" -}}
{{- default "rag-monitor" .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "rag-monitor.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default "rag-monitor" .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "rag-monitor.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "rag-monitor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rag-monitor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "rag-monitor.labels" -}}
helm.sh/chart: {{ include "rag-monitor.chart" . }}
{{ include "rag-monitor.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: rag-monitor
{{- end }}

{{- define "rag-monitor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "rag-monitor.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "rag-monitor.configMapName" -}}
{{- include "rag-monitor.fullname" . }}
{{- end }}

{{- define "rag-monitor.secretName" -}}
{{- default (include "rag-monitor.fullname" .) .Values.existingSecret }}
{{- end }}

{{- define "rag-monitor.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) }}
{{- end }}

{{/* One settings value as an env string (see values.yaml `settings`). */}}
{{- define "rag-monitor.settingValue" -}}
{{- $k := .key }}{{- $v := .value }}
{{- if and (kindIs "slice" $v) (has $k (list "online_metrics" "routes")) }}
{{- join "," $v }}
{{- else if or (kindIs "slice" $v) (kindIs "map" $v) }}
{{- toJson $v }}
{{- else if and (kindIs "float64" $v) (eq (float64 (int64 $v)) $v) }}
{{- int64 $v }}
{{- else }}
{{- toString $v }}
{{- end }}
{{- end }}

{{- define "rag-monitor.metricsPort" -}}
{{- .Values.settings.metrics_port | default 9108 | int }}
{{- end }}

{{/*
The monitor container. Used by the Deployment, the CronJob (with .args) and
`rag-monitor.sidecarContainer`. Expects a dict: ctx (helper context), args
(list), probes (bool), resources (map).
*/}}
{{- define "rag-monitor.container" -}}
{{- $ctx := .ctx -}}
- name: {{ .name | default "rag-monitor" }}
  image: {{ include "rag-monitor.image" $ctx | quote }}
  imagePullPolicy: {{ $ctx.Values.image.pullPolicy }}
  args:
    {{- toYaml .args | nindent 4 }}
  {{- if .probes }}
  ports:
    - name: metrics
      containerPort: {{ include "rag-monitor.metricsPort" $ctx }}
      protocol: TCP
  {{- end }}
  {{- if and .probes $ctx.Values.deployment.staticMembership }}
  env:
    - name: RAG_MONITOR_KAFKA_GROUP_INSTANCE_ID
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
  {{- end }}
  envFrom:
    - configMapRef:
        name: {{ include "rag-monitor.configMapName" $ctx }}
    - secretRef:
        name: {{ include "rag-monitor.secretName" $ctx }}
  {{- if .probes }}
  livenessProbe:
    {{- toYaml $ctx.Values.livenessProbe | nindent 4 }}
  readinessProbe:
    {{- toYaml $ctx.Values.readinessProbe | nindent 4 }}
  {{- end }}
  resources:
    {{- toYaml .resources | nindent 4 }}
  securityContext:
    {{- toYaml $ctx.Values.securityContext | nindent 4 }}
  volumeMounts:
    - name: {{ .tmpVolume | default "tmp" }}
      mountPath: /tmp
{{- end }}

{{/* The writable /tmp volume of the monitor. */}}
{{- define "rag-monitor.tmpVolume" -}}
- name: {{ .name | default "tmp" }}
  emptyDir:
    sizeLimit: {{ .ctx.Values.tmpVolume.sizeLimit }}
{{- end }}

{{/*
rag-monitor.sidecarContainer — the monitor as a container in the RAG service's
own pod spec. Call it from a chart that has rag-monitor as a dependency (with
`deployment.enabled: false` under `rag-monitor:` so only the ConfigMap, Secret,
rules and dashboard are rendered by this chart), passing the root context:

  containers:
    - name: rag-service
      ...
    {{- include "rag-monitor.sidecarContainer" . | nindent 4 }}
  volumes:
    {{- include "rag-monitor.sidecarVolume" . | nindent 4 }}

The container mounts an emptyDir named `rag-monitor-tmp` at /tmp (add it with
`rag-monitor.sidecarVolume`) and exposes port `metrics`; add
`prometheus.io`-style scraping or a PodMonitor for it.
*/}}
{{- define "rag-monitor.sidecarContext" -}}
{{- $values := .Values }}
{{- $chart := .Chart }}
{{- if hasKey .Values "rag-monitor" }}
{{- $values = index .Values "rag-monitor" }}
{{- end }}
{{- if and .Subcharts (hasKey .Subcharts "rag-monitor") }}
{{- $chart = (index .Subcharts "rag-monitor").Chart }}
{{- end }}
{{- toJson (dict "Values" $values "Release" (dict "Name" .Release.Name "Service" .Release.Service "Namespace" .Release.Namespace) "Chart" (dict "Name" $chart.Name "Version" $chart.Version "AppVersion" $chart.AppVersion)) }}
{{- end }}

{{- define "rag-monitor.sidecarContainer" -}}
{{- $ctx := include "rag-monitor.sidecarContext" . | fromJson }}
{{- include "rag-monitor.container" (dict "ctx" $ctx "name" "rag-monitor" "args" (list "run") "probes" true "resources" $ctx.Values.resources "tmpVolume" "rag-monitor-tmp") }}
{{- end }}

{{- define "rag-monitor.sidecarVolume" -}}
{{- $ctx := include "rag-monitor.sidecarContext" . | fromJson }}
{{- include "rag-monitor.tmpVolume" (dict "ctx" $ctx "name" "rag-monitor-tmp") }}
{{- end }}
