{{/*
The recording and alerting rules of the PrometheusRule (templates/prometheusrule.yaml).
dashboards/alerts.yaml is this output at the chart's default values, written by
scripts/render_alerts.py; tests/test_alerts.py checks that it still is.
Expects the root context; the knobs are under .Values.prometheusRule.
*/}}

{{/* One alert: dict with ctx, name, expr, summary, description. */}}
{{- define "rag-monitor.alertRule" -}}
{{- $r := .ctx.Values.prometheusRule }}
{{- $a := index $r.alerts .name -}}
- alert: {{ .name }}
  expr: |
    {{- .expr | trim | nindent 4 }}
  for: {{ $a.for }}
  labels:
    {{- toYaml (merge (dict "severity" $a.severity) $r.alertLabels) | nindent 4 }}
  annotations:
    summary: {{ .summary | quote }}
    description: >-
      {{- .description | trim | nindent 6 }}
    runbook_url: {{ printf "%s#%s" $r.runbookBaseUrl (lower .name) }}
{{- end }}

{{- define "rag-monitor.ruleGroups" -}}
{{- $r := .Values.prometheusRule }}
{{- $slo := $r.slo }}
{{- $o := $slo.maxHallucinationRatio }}
{{- $pct := printf "%v%%" (mulf $o 100) }}
{{- $n := include "rag-monitor.number" $slo.minRecords }}
{{- $fast := printf "(%v * %v)" $slo.fastBurnFactor $o }}
{{- $slow := printf "(%v * %v)" $slo.slowBurnFactor $o }}
{{- $job := "{{ $labels.job }}" }}
{{- $ns := "{{ $labels.namespace }}" }}
{{- $value := "{{ $value | humanizePercentage }}" }}
{{- /* what an answer counts as, the monitor's faithfulness threshold (monitor/flags.py) */}}
{{- $faith := float64 (dig "thresholds" "faithfulness" 1 .Values.settings) }}
{{- $rule := printf "Hallucinated: faithfulness below %v (settings.thresholds)." $faith }}
{{- if ge $faith 1.0 }}
{{- $rule = "Hallucinated: at least one claim the retrieved context does not support (faithfulness below 1)." }}
{{- end }}
{{- $alerts := list }}
{{- range $name, $a := $r.alerts }}
{{- if $a.enabled }}{{ $alerts = append $alerts $name }}{{ end }}
{{- end -}}
# Hallucination SLO: at most {{ $pct }} of scored answers hallucinated, weighted by
# 1/p (p = inclusion probability) so the rate is an unbiased estimate for all
# traffic. Error budget = {{ $o }}. No page comes from a judge's known bias: only
# rates that can be believed are held against the SLO.
#   - the LLM judge's raw rate (judge="llm"), in multi-window, multi-burn-rate
#     alerts (Google SRE workbook, ch. 5):
#       fast burn: 1h and 5m windows above {{ $slo.fastBurnFactor }} x {{ $o }} = {{ mulf $slo.fastBurnFactor $o }}
#       slow burn: 6h and 30m windows above {{ $slo.slowBurnFactor }} x {{ $o }} = {{ mulf $slo.slowBurnFactor $o }}
#     both also need at least {{ $n }} scored records in the long window, so a
#     handful of samples on a quiet service cannot page anyone;
#   - the calibrated rate (reviewer verdicts), with any judge: its 95% lower
#     bound above {{ $o }};
#   - the local judge is a screen: its raw rate is never compared with the SLO,
#     only with its own value a day earlier (the spike alert, per judge).
groups:
  - name: rag-monitor.recording
    interval: 1m
    rules:
      # Weighted hallucination ratio over the SLO windows, per deployment and
      # judge (llm, or local: a screen whose raw rate is not held against the SLO).
      {{- range $w := list "5m" "30m" "1h" "6h" }}
      - record: rag_monitor:hallucination_ratio:rate{{ $w }}
        expr: |
          sum by (namespace, job, judge) (rate(rag_monitor_hallucination_weight_total[{{ $w }}]))
            /
          sum by (namespace, job, judge) (rate(rag_monitor_scored_weight_total[{{ $w }}]))
      {{- end }}
      # The same hour one day earlier, from the raw counters (works from the
      # first day the counters exist, not the first day the rules exist).
      - record: rag_monitor:hallucination_ratio:rate1h_offset1d
        expr: |
          sum by (namespace, job, judge) (rate(rag_monitor_hallucination_weight_total[1h] offset 1d))
            /
          sum by (namespace, job, judge) (rate(rag_monitor_scored_weight_total[1h] offset 1d))
      # Weighted share of the answers with a faithfulness score that had no
      # retrieved context (retrieval failures). The hallucination ratios above
      # leave these answers out: scored_weight_total counts only answers with a
      # context.
      - record: rag_monitor:no_context_ratio:rate30m
        expr: |
          sum by (namespace, job) (rate(rag_monitor_no_context_weight_total[30m]))
            /
          (
            sum by (namespace, job) (rate(rag_monitor_no_context_weight_total[30m]))
              +
            sum by (namespace, job) (rate(rag_monitor_scored_weight_total[30m]))
          )
      # Volume guards: records actually scored (not weighted) in a window.
      - record: rag_monitor:records_scored:increase1h
        expr: sum by (namespace, job) (increase(rag_monitor_records_scored_total[1h]))
      - record: rag_monitor:records_scored:increase6h
        expr: sum by (namespace, job) (increase(rag_monitor_records_scored_total[6h]))
      # Judge requests that did not succeed, as a share of all judge requests.
      - record: rag_monitor:judge_error_ratio:rate10m
        expr: |
          sum by (namespace, job) (rate(rag_monitor_judge_requests_total{outcome!="ok"}[10m]))
            /
          sum by (namespace, job) (rate(rag_monitor_judge_requests_total[10m]))
      # Reviewer verdicts per flag reason (control answers are no flag): every
      # replica exports the same counts from Postgres, so max, not sum. Confirmed,
      # and confirmed + false_alarm (an unsure verdict says nothing of precision).
      - record: rag_monitor:review_verdicts:confirmed
        expr: |
          max by (namespace, job, reason) (
            rag_monitor_review_verdicts_total{verdict="confirmed", reason!="control"}
          )
      - record: rag_monitor:review_verdicts:informative
        expr: |
          sum by (namespace, job, reason) (
            max by (namespace, job, reason, verdict) (
              rag_monitor_review_verdicts_total{verdict=~"confirmed|false_alarm", reason!="control"}
            )
          )
      # Flag precision over the verdicts of the last 7 days, and over those
      # before them (the judge's own measured precision).
      - record: rag_monitor:review_verdicts:informative7d
        expr: |
          rag_monitor:review_verdicts:informative
            - rag_monitor:review_verdicts:informative offset 7d
      - record: rag_monitor:flag_precision:last7d
        expr: |
          (
            rag_monitor:review_verdicts:confirmed
              - rag_monitor:review_verdicts:confirmed offset 7d
          )
            /
          rag_monitor:review_verdicts:informative7d
      - record: rag_monitor:flag_precision:before7d
        expr: |
          rag_monitor:review_verdicts:confirmed offset 7d
            /
          rag_monitor:review_verdicts:informative offset 7d
      # Total consumer lag; max by partition first so a replica that still
      # reports a partition it lost in a rebalance is not counted twice.
      - record: rag_monitor:consumer_lag:sum
        expr: |
          sum by (namespace, job) (
            max by (namespace, job, partition) (rag_monitor_consumer_lag)
          )
{{- if $alerts }}
{{- $rules := list }}
{{- if has "RagMonitorHallucinationBudgetBurnFast" $alerts }}
{{- $rules = append $rules (include "rag-monitor.alertRule" (dict "ctx" . "name" "RagMonitorHallucinationBudgetBurnFast"
        "expr" (printf `
rag_monitor:hallucination_ratio:rate1h{judge="llm"} > %s
and
rag_monitor:hallucination_ratio:rate5m{judge="llm"} > %s
and on (namespace, job)
rag_monitor:records_scored:increase1h >= %v` $fast $fast $n)
        "summary" (printf "Hallucination rate is burning the %s SLO budget %vx too fast" $pct $slo.fastBurnFactor)
        "description" (printf `
%s in %s: %s
of weighted answers the LLM judge scored in the last hour were hallucinated
(SLO: at most %s); the last 5 minutes agree. %s` $job $ns $value $pct $rule))) }}
{{- end }}
{{- if has "RagMonitorHallucinationBudgetBurnSlow" $alerts }}
{{- $rules = append $rules (include "rag-monitor.alertRule" (dict "ctx" . "name" "RagMonitorHallucinationBudgetBurnSlow"
        "expr" (printf `
rag_monitor:hallucination_ratio:rate6h{judge="llm"} > %s
and
rag_monitor:hallucination_ratio:rate30m{judge="llm"} > %s
and on (namespace, job)
rag_monitor:records_scored:increase6h >= %v` $slow $slow $n)
        "summary" (printf "Hallucination rate is burning the %s SLO budget %vx too fast" $pct $slo.slowBurnFactor)
        "description" (printf `
%s in %s: %s
of weighted answers the LLM judge scored in the last 6 hours were hallucinated
(SLO: at most %s); the last 30 minutes agree. %s` $job $ns $value $pct $rule))) }}
{{- end }}
{{- if has "RagMonitorCalibratedRateAboveSlo" $alerts }}
{{- $rules = append $rules (include "rag-monitor.alertRule" (dict "ctx" . "name" "RagMonitorCalibratedRateAboveSlo"
        "expr" (printf `
max by (namespace, job) (rag_monitor_hallucination_rate_calibrated_lower) > %v` $o)
        "summary" (printf "Reviewers' verdicts put the hallucination rate above the %s SLO" $pct)
        "description" (printf `
%s in %s: the calibrated hallucination rate
(the judge's flags corrected by reviewer verdicts) is above %s even at the
lower end of its 95%% interval, {{ $value | humanizePercentage }}. %s` $job $ns $pct $rule))) }}
{{- end }}
{{- if has "RagMonitorHallucinationSpike" $alerts }}
{{- $rules = append $rules (include "rag-monitor.alertRule" (dict "ctx" . "name" "RagMonitorHallucinationSpike"
        "expr" (printf `
rag_monitor:hallucination_ratio:rate1h
  > 2 * rag_monitor:hallucination_ratio:rate1h_offset1d
and
rag_monitor:hallucination_ratio:rate1h
  - rag_monitor:hallucination_ratio:rate1h_offset1d > 0.02
and on (namespace, job)
rag_monitor:records_scored:increase1h >= %v` $n)
        "summary" "The {{ $labels.judge }} judge's hallucination rate doubled against the same hour yesterday"
        "description" (printf `
%s in %s: the weighted hallucination
rate of the {{ $labels.judge }} judge in the last hour is %s, more than
twice (and 2 points above) its own rate in the same hour one day earlier. %s` $job $ns $value $rule))) }}
{{- end }}
{{- if has "RagMonitorNoContext" $alerts }}
{{- $nc := $r.alerts.RagMonitorNoContext }}
{{- $rules = append $rules (include "rag-monitor.alertRule" (dict "ctx" . "name" "RagMonitorNoContext"
        "expr" (printf `
rag_monitor:no_context_ratio:rate30m > %v
and
rag_monitor:records_scored:increase1h >= %s` $nc.maxRatio (include "rag-monitor.number" $nc.minRecords))
        "summary" (printf "More than %v%% of scored answers had no retrieved context" (mulf $nc.maxRatio 100))
        "description" (printf `
%s in %s: %s
of weighted scored answers in the last 30 minutes came with no retrieved
context. A retrieval failure, not a hallucination: these answers are left
out of the hallucination rate.` $job $ns $value))) }}
{{- end }}
{{- if has "RagMonitorJudgeErrors" $alerts }}
{{- $je := $r.alerts.RagMonitorJudgeErrors }}
{{- $rules = append $rules (include "rag-monitor.alertRule" (dict "ctx" . "name" "RagMonitorJudgeErrors"
        "expr" (printf `
rag_monitor:judge_error_ratio:rate10m > %v
and
sum by (namespace, job) (increase(rag_monitor_judge_requests_total[10m])) >= %v` $je.maxErrorRatio (include "rag-monitor.number" $je.minRequests))
        "summary" (printf "More than %v%% of judge requests fail" (mulf $je.maxErrorRatio 100))
        "description" (printf `
%s in %s: %s
of judge requests in the last 10 minutes did not return ok; those
records are skipped, not scored.` $job $ns $value))) }}
{{- end }}
{{- if has "RagMonitorTokenBudgetExhausted" $alerts }}
{{- $rules = append $rules (include "rag-monitor.alertRule" (dict "ctx" . "name" "RagMonitorTokenBudgetExhausted"
        "expr" `
(
  max by (namespace, job, instance) (rag_monitor_token_budget_remaining) <= 0
  unless on (namespace, job, instance)
  max by (namespace, job, instance) (rag_monitor_token_budget_share) == 0
)
or
sum by (namespace, job, instance) (
  rate(rag_monitor_records_skipped_total{reason="budget"}[15m])
) > 0`
        "summary" "The judge token budget is exhausted; sampled records are skipped"
        "description" (printf `
{{ $labels.instance }} (%s in %s) has had
no token budget left, or has skipped records for lack of budget,
for %s; the monitor sees less traffic than configured.` $job $ns (include "rag-monitor.duration" $r.alerts.RagMonitorTokenBudgetExhausted.for)))) }}
{{- end }}
{{- if has "RagMonitorConsumerLagGrowing" $alerts }}
{{- $lag := $r.alerts.RagMonitorConsumerLagGrowing }}
{{- $rules = append $rules (include "rag-monitor.alertRule" (dict "ctx" . "name" "RagMonitorConsumerLagGrowing"
        "expr" (printf `
deriv(rag_monitor:consumer_lag:sum[15m]) > 0
and
rag_monitor:consumer_lag:sum > %s` (include "rag-monitor.number" $lag.minLag))
        "summary" "The monitor falls behind its Kafka topic"
        "description" (printf `
%s in %s: consumer lag grows by
{{ $value | humanize }} records per second and is above %s records.` $job $ns (include "rag-monitor.number" $lag.minLag)))) }}
{{- end }}
{{- if has "RagMonitorBacklogWriteErrors" $alerts }}
{{- $rules = append $rules (include "rag-monitor.alertRule" (dict "ctx" . "name" "RagMonitorBacklogWriteErrors"
        "expr" `
sum by (namespace, job) (increase(rag_monitor_backlog_write_errors_total[10m])) > 0`
        "summary" "Flagged interactions cannot be written to the Postgres backlog"
        "description" (printf `
%s in %s: {{ $value | humanize }} backlog
writes failed in the last 10 minutes. Offsets do not move past
unwritten records, so lag will grow.` $job $ns))) }}
{{- end }}
{{- if has "RagMonitorFlagPrecisionLow" $alerts }}
{{- $fp := $r.alerts.RagMonitorFlagPrecisionLow }}
{{- $fpn := include "rag-monitor.number" $fp.minVerdicts }}
{{- $rules = append $rules (include "rag-monitor.alertRule" (dict "ctx" . "name" "RagMonitorFlagPrecisionLow"
        "expr" (printf `
(
  (
    # an LLM judge, whose raw rate pages: below the level
    rag_monitor:flag_precision:last7d < %v
    and on (namespace, job)
    max by (namespace, job) (rag_monitor_judge_info{kind="llm", role="primary"})
  )
  or
  (
    # any judge: well below its own precision before these 7 days
    rag_monitor:flag_precision:last7d < (rag_monitor:flag_precision:before7d - %v)
    and on (namespace, job, reason)
    rag_monitor:review_verdicts:informative offset 7d >= %s
  )
)
and on (namespace, job, reason)
rag_monitor:review_verdicts:informative7d >= %s` $fp.minPrecision $fp.maxDrop $fpn $fpn)
        "summary" "Reviewers confirm fewer of the judge's {{ $labels.reason }} flags than they should"
        "description" (printf `
%s in %s: reviewers confirmed only
{{ $value | humanizePercentage }} of the {{ $labels.reason }} flags they reviewed
in the last 7 days: below %v with an LLM judge, whose raw rate pages, or more
than %v below the judge's own precision before them. Its raw rate overstates
the problem more than it did.` $job $ns $fp.minPrecision $fp.maxDrop))) }}
{{- end }}
{{- if has "RagMonitorAbsent" $alerts }}
{{- $rules = append $rules (include "rag-monitor.alertRule" (dict "ctx" . "name" "RagMonitorAbsent"
        "expr" `
absent(up{job=~".*rag-monitor.*"} == 1)`
        "summary" "No rag-monitor target is up"
        "description" (printf `
Prometheus has scraped no healthy rag-monitor target for %s:
hallucination alerts are blind.` (include "rag-monitor.duration" $r.alerts.RagMonitorAbsent.for)))) }}
{{- end }}

  - name: rag-monitor.alerts
    rules:
{{ join "\n\n" $rules | indent 6 }}
{{- end }}
{{- end }}

{{/* A number as PromQL and people write it: 1000000, not 1e+06 (values arrive as floats). */}}
{{- define "rag-monitor.number" -}}
{{- if eq (float64 (int64 .)) (float64 .) }}{{ int64 . }}{{ else }}{{ . }}{{ end }}
{{- end }}

{{/* A Prometheus duration in words: 30m -> "30 minutes", 1h -> "1 hour". */}}
{{- define "rag-monitor.duration" -}}
{{- if not (regexMatch "^[0-9]+[smhd]$" .) }}
{{- fail (printf "prometheusRule.alerts.*.for %q: one number and one unit (s, m, h or d)" .) }}
{{- end }}
{{- $units := dict "s" "second" "m" "minute" "h" "hour" "d" "day" }}
{{- $n := regexFind "^[0-9]+" . }}
{{- $u := index $units (trimPrefix $n .) }}
{{- printf "%s %s%s" $n $u (ternary "" "s" (eq $n "1")) }}
{{- end }}
