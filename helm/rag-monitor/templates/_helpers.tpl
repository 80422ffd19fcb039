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

{{/* Labels of the `helm test` pod: not the selector labels, so no Service, PDB or policy picks it. */}}
{{- define "rag-monitor.testPodLabels" -}}
app.kubernetes.io/name: {{ include "rag-monitor.name" . }}-test
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: test
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

{{/* repository@digest when image.digest is set (the tag is then ignored), else repository:tag. */}}
{{- define "rag-monitor.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) }}
{{- end }}
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
The monitor container. Used by the Deployment, the CronJob, the migration Job
(with .args) and `rag-monitor.sidecarContainer`. Expects a dict: ctx (helper
context), args (list), probes (bool: ports and probes of `run`), kafka (bool:
the Kafka TLS files and settings), resources (map); optional name, tmpVolume,
tlsVolume (volume names) and optionalConfig (the ConfigMap may be missing, as
it is before a first install).
*/}}
{{- define "rag-monitor.container" -}}
{{- $ctx := .ctx -}}
{{- $tls := and .kafka $ctx.Values.kafkaTls.secretName -}}
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
  {{- $member := and .probes $ctx.Values.deployment.staticMembership }}
  {{- if or $member $tls $ctx.Values.extraEnv }}
  env:
    {{- if $member }}
    - name: RAG_MONITOR_KAFKA_GROUP_INSTANCE_ID
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    {{- end }}
    {{- if $tls }}
    {{- include "rag-monitor.kafkaTlsEnv" $ctx | nindent 4 }}
    {{- end }}
    {{- with $ctx.Values.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
  envFrom:
    - configMapRef:
        name: {{ include "rag-monitor.configMapName" $ctx }}
        {{- if .optionalConfig }}
        optional: true
        {{- end }}
    - secretRef:
        name: {{ .secretName | default (include "rag-monitor.secretName" $ctx) }}
    {{- with $ctx.Values.extraEnvFrom }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
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
    {{- if $tls }}
    - name: {{ .tlsVolume | default "kafka-tls" }}
      mountPath: {{ include "rag-monitor.kafkaTlsDir" $ctx }}
      readOnly: true
    {{- end }}
    {{- with $ctx.Values.extraVolumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}

{{/* The writable /tmp volume of the monitor. */}}
{{- define "rag-monitor.tmpVolume" -}}
- name: {{ .name | default "tmp" }}
  emptyDir:
    sizeLimit: {{ .ctx.Values.tmpVolume.sizeLimit }}
{{- end }}

{{/*
The volumes of a pod that runs the monitor: /tmp, the Kafka TLS Secret (with
kafka: true) and extraVolumes. Expects a dict: ctx, kafka; optional tmpVolume
and tlsVolume (names).
*/}}
{{- define "rag-monitor.volumes" -}}
{{- include "rag-monitor.tmpVolume" (dict "ctx" .ctx "name" .tmpVolume) }}
{{- if and .kafka .ctx.Values.kafkaTls.secretName }}
- name: {{ .tlsVolume | default "kafka-tls" }}
  secret:
    secretName: {{ .ctx.Values.kafkaTls.secretName }}
    defaultMode: {{ .ctx.Values.kafkaTls.defaultMode }}
{{- end }}
{{- with .ctx.Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "rag-monitor.kafkaTlsDir" -}}
/etc/rag-monitor/kafka-tls
{{- end }}

{{/* The RAG_MONITOR_KAFKA_SSL_* variables that point at the mounted Secret. */}}
{{- define "rag-monitor.kafkaTlsEnv" -}}
{{- $t := .Values.kafkaTls }}
{{- $dir := include "rag-monitor.kafkaTlsDir" . }}
{{- $protocol := .Values.settings.kafka_security_protocol | default "PLAINTEXT" }}
{{- if not (has $protocol (list "SSL" "SASL_SSL")) }}
{{- fail (printf "kafkaTls.secretName is set but settings.kafka_security_protocol is %s: set SSL or SASL_SSL" $protocol) }}
{{- end }}
{{- if ne (empty $t.certKey) (empty $t.keyKey) }}
{{- fail "kafkaTls: set both certKey and keyKey (a client certificate and its key), or neither" }}
{{- end -}}
- name: RAG_MONITOR_KAFKA_SSL_CAFILE
  value: {{ printf "%s/%s" $dir $t.caKey | quote }}
{{- if $t.certKey }}
- name: RAG_MONITOR_KAFKA_SSL_CERTFILE
  value: {{ printf "%s/%s" $dir $t.certKey | quote }}
- name: RAG_MONITOR_KAFKA_SSL_KEYFILE
  value: {{ printf "%s/%s" $dir $t.keyKey | quote }}
{{- end }}
- name: RAG_MONITOR_KAFKA_SSL_CHECK_HOSTNAME
  value: {{ $t.checkHostname | toString | quote }}
{{- end }}

{{/* Pod-level fields every monitor pod shares (after the pod's own spec fields). */}}
{{- define "rag-monitor.podExtras" -}}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Pod labels and annotations of the jobs (podLabels, podAnnotations). Expects dict ctx, name. */}}
{{- define "rag-monitor.jobPodMetadata" -}}
{{- with .ctx.Values.podAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
labels:
  app.kubernetes.io/name: {{ include "rag-monitor.name" .ctx }}-{{ .name }}
  app.kubernetes.io/instance: {{ .ctx.Release.Name }}
  {{- with .ctx.Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
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

The container mounts an emptyDir named `rag-monitor-tmp` at /tmp, the Kafka
TLS Secret as `rag-monitor-kafka-tls` (with kafkaTls.secretName) and the
extraVolumeMounts (add the volumes with `rag-monitor.sidecarVolume`, which also
renders extraVolumes) and exposes port `metrics`; scrape it with the chart's
PodMonitor (podMonitor.enabled).
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
{{- include "rag-monitor.container" (dict "ctx" $ctx "name" "rag-monitor" "args" (list "run") "probes" true "kafka" true "resources" $ctx.Values.resources "tmpVolume" "rag-monitor-tmp" "tlsVolume" "rag-monitor-kafka-tls") }}
{{- end }}

{{- define "rag-monitor.sidecarVolume" -}}
{{- $ctx := include "rag-monitor.sidecarContext" . | fromJson }}
{{- include "rag-monitor.volumes" (dict "ctx" $ctx "kafka" true "tmpVolume" "rag-monitor-tmp" "tlsVolume" "rag-monitor-kafka-tls") }}
{{- end }}

{{/*
"true" when the Prometheus Operator's resources (ServiceMonitor, PodMonitor,
PrometheusRule) can be applied: the cluster serves monitoring.coreos.com/v1
(`helm install` asks it; `helm template` knows it only from
--api-versions monitoring.coreos.com/v1), or prometheusOperator.assumeInstalled.
Empty otherwise: the resources are left out instead of failing the install.
*/}}
{{- define "rag-monitor.prometheusOperator" -}}
{{- if or .Values.prometheusOperator.assumeInstalled (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1") }}true{{ end }}
{{- end }}
