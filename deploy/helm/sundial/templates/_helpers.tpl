{{/* Names. */}}
{{- define "sundial.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "sundial.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "sundial.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "sundial.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Labels of every object; "component" is the Sundial component, also the
  metrics' component label the dashboards and alerts select by. */}}
{{- define "sundial.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: sundial
app.kubernetes.io/version: {{ default .root.Chart.AppVersion .root.Values.image.tag | quote }}
{{ include "sundial.selectorLabels" . }}
{{- end -}}

{{- define "sundial.selectorLabels" -}}
app.kubernetes.io/name: sundial
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end -}}

{{/* The backends' part of a config file: the keys of the backends in
  .uses ("kafka", "cassandra", "redis"). Passwords are not in it: they come
  from Secrets as environment variables (sundial.secretEnv). */}}
{{- define "sundial.backendConfig" -}}
{{- $v := .root.Values -}}
{{- $c := dict -}}
{{- if has "kafka" .uses -}}
{{- if not $v.kafka.brokers }}{{ fail "kafka.brokers: required (host:port of the seed brokers)" }}{{ end -}}
{{- $_ := set $c "kafka-brokers" $v.kafka.brokers -}}
{{- with $v.kafka.topicPrefix }}{{ $_ := set $c "topic-prefix" . }}{{ end -}}
{{- include "sundial.tlsConfig" (dict "c" $c "backend" "kafka" "tls" $v.kafka.tls) -}}
{{- with $v.kafka.sasl.mechanism -}}
{{- if not (has . (list "PLAIN" "SCRAM-SHA-256" "SCRAM-SHA-512" "OAUTHBEARER")) }}{{ fail (printf "kafka.sasl.mechanism: %q is not PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER" .) }}{{ end -}}
{{- $_ := set $c "kafka-sasl-mechanism" . -}}
{{- if eq . "OAUTHBEARER" -}}
{{- if not $v.kafka.sasl.tokenSecret.name }}{{ fail "kafka.sasl.tokenSecret.name: required with OAUTHBEARER" }}{{ end -}}
{{- $_ := set $c "kafka-sasl-token-file" (printf "/etc/sundial/secrets/kafka/%s" $v.kafka.sasl.tokenSecret.key) -}}
{{- else -}}
{{- if not $v.kafka.sasl.username }}{{ fail (printf "kafka.sasl.username: required with %s" .) }}{{ end -}}
{{- if not $v.kafka.sasl.passwordSecret.name }}{{ fail (printf "kafka.sasl.passwordSecret.name: required with %s" .) }}{{ end -}}
{{- $_ := set $c "kafka-sasl-username" $v.kafka.sasl.username -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if has "cassandra" .uses -}}
{{- if not $v.cassandra.hosts }}{{ fail "cassandra.hosts: required (contact points)" }}{{ end -}}
{{- $_ := set $c "cassandra-hosts" $v.cassandra.hosts -}}
{{- $_ := set $c "keyspace" $v.cassandra.keyspace -}}
{{- with $v.cassandra.datacenter }}{{ $_ := set $c "cassandra-datacenter" . }}{{ end -}}
{{- include "sundial.tlsConfig" (dict "c" $c "backend" "cassandra" "tls" $v.cassandra.tls) -}}
{{- with $v.cassandra.username }}{{ $_ := set $c "cassandra-username" . }}{{ end -}}
{{- end -}}
{{- if has "redis" .uses -}}
{{- if not $v.redis.addrs }}{{ fail "redis.addrs: required (host:port)" }}{{ end -}}
{{- $_ := set $c "redis-addr" (join "," $v.redis.addrs) -}}
{{- if $v.redis.cluster }}{{ $_ := set $c "redis-cluster" true }}{{ end -}}
{{- with $v.redis.keyPrefix }}{{ $_ := set $c "redis-key-prefix" . }}{{ end -}}
{{- include "sundial.tlsConfig" (dict "c" $c "backend" "redis" "tls" $v.redis.tls) -}}
{{- with $v.redis.username }}{{ $_ := set $c "redis-username" . }}{{ end -}}
{{- end -}}
{{- toYaml $c -}}
{{- end -}}

{{/* Sets the <backend>-tls* keys in .c from a tls value. */}}
{{- define "sundial.tlsConfig" -}}
{{- if .tls.enabled -}}
{{- if not .tls.secretName }}{{ fail (printf "%s.tls.secretName: required when %s.tls.enabled (a Secret with the CA and client files)" .backend .backend) }}{{ end -}}
{{- if ne (empty .tls.cert) (empty .tls.key) }}{{ fail (printf "%s.tls.cert and %s.tls.key: give both (mutual TLS) or neither" .backend .backend) }}{{ end -}}
{{- $dir := printf "/etc/sundial/tls/%s" .backend -}}
{{- $_ := set .c (printf "%s-tls" .backend) true -}}
{{- with .tls.ca }}{{ $_ := set $.c (printf "%s-tls-ca-file" $.backend) (printf "%s/%s" $dir .) }}{{ end -}}
{{- with .tls.cert }}{{ $_ := set $.c (printf "%s-tls-cert-file" $.backend) (printf "%s/%s" $dir .) }}{{ end -}}
{{- with .tls.key }}{{ $_ := set $.c (printf "%s-tls-key-file" $.backend) (printf "%s/%s" $dir .) }}{{ end -}}
{{- with .tls.serverName }}{{ $_ := set $.c (printf "%s-tls-server-name" $.backend) . }}{{ end -}}
{{- end -}}
{{- end -}}

{{/* A component's config file: backends, logging, metrics address, then the
  component's own keys, which win. */}}
{{- define "sundial.componentConfig" -}}
{{- $c := fromYaml (include "sundial.backendConfig" .) -}}
{{- $_ := set $c "log-level" .root.Values.logLevel -}}
{{- $_ := set $c "log-format" .root.Values.logFormat -}}
{{- $_ := set $c "metrics-addr" (printf ":%v" .root.Values.metricsPort) -}}
{{- toYaml (mergeOverwrite $c (deepCopy (default dict .extra))) -}}
{{- end -}}

{{/* Environment variables of the passwords, from Secrets. */}}
{{- define "sundial.secretEnv" -}}
{{- $v := .root.Values -}}
{{- if and (has "kafka" .uses) $v.kafka.sasl.mechanism (ne $v.kafka.sasl.mechanism "OAUTHBEARER") }}
- name: SUNDIAL_KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef: {name: {{ $v.kafka.sasl.passwordSecret.name | quote }}, key: {{ $v.kafka.sasl.passwordSecret.key | quote }}}
{{- end }}
{{- if and (has "cassandra" .uses) $v.cassandra.username }}
{{- if not $v.cassandra.passwordSecret.name }}{{ fail "cassandra.passwordSecret.name: required with cassandra.username" }}{{ end }}
- name: SUNDIAL_CASSANDRA_PASSWORD
  valueFrom:
    secretKeyRef: {name: {{ $v.cassandra.passwordSecret.name | quote }}, key: {{ $v.cassandra.passwordSecret.key | quote }}}
{{- end }}
{{- if and (has "redis" .uses) $v.redis.passwordSecret.name }}
- name: SUNDIAL_REDIS_PASSWORD
  valueFrom:
    secretKeyRef: {name: {{ $v.redis.passwordSecret.name | quote }}, key: {{ $v.redis.passwordSecret.key | quote }}}
{{- end }}
{{- end -}}

{{/* Volumes of the TLS files and the OAUTHBEARER token; sundial.secretMounts
  mounts them. */}}
{{- define "sundial.secretVolumes" -}}
{{- $v := .root.Values -}}
{{- range $b := list "kafka" "cassandra" "redis" }}
{{- $tls := (get $v $b).tls }}
{{- if and (has $b $.uses) $tls.enabled }}
- name: {{ $b }}-tls
  secret:
    secretName: {{ $tls.secretName | quote }}
    defaultMode: 0440
{{- end }}
{{- end }}
{{- if and (has "kafka" .uses) (eq $v.kafka.sasl.mechanism "OAUTHBEARER") }}
- name: kafka-token
  secret:
    secretName: {{ $v.kafka.sasl.tokenSecret.name | quote }}
    defaultMode: 0440
    items: [{key: {{ $v.kafka.sasl.tokenSecret.key | quote }}, path: {{ $v.kafka.sasl.tokenSecret.key | quote }}}]
{{- end }}
{{- end -}}

{{- define "sundial.secretMounts" -}}
{{- $v := .root.Values -}}
{{- range $b := list "kafka" "cassandra" "redis" }}
{{- if and (has $b $.uses) (get $v $b).tls.enabled }}
- {name: {{ $b }}-tls, mountPath: /etc/sundial/tls/{{ $b }}, readOnly: true}
{{- end }}
{{- end }}
{{- if and (has "kafka" .uses) (eq $v.kafka.sasl.mechanism "OAUTHBEARER") }}
- {name: kafka-token, mountPath: /etc/sundial/secrets/kafka, readOnly: true}
{{- end }}
{{- end -}}

{{/* The pod template of a long-running component.
  .root: the chart's context; .component: its name (label and config key);
  .values: its values; .args: the subcommand; .uses: its backends;
  .env: more environment variables (a list). */}}
{{- define "sundial.podTemplate" -}}
metadata:
  labels:
    {{- include "sundial.labels" . | nindent 4 }}
  annotations:
    checksum/config: {{ include (print .root.Template.BasePath "/configmap.yaml") .root | sha256sum }}
    {{- with .values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "sundial.serviceAccountName" .root }}
  automountServiceAccountToken: false
  {{- with .root.Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml .root.Values.podSecurityContext | nindent 4 }}
  {{- with .values.terminationGracePeriodSeconds }}
  terminationGracePeriodSeconds: {{ . }}
  {{- end }}
  containers:
    - name: {{ .component }}
      image: {{ include "sundial.image" .root | quote }}
      imagePullPolicy: {{ .root.Values.image.pullPolicy }}
      args: {{ toJson .args }}
      env:
        # The config file; flags and SUNDIAL_* variables win over it.
        - name: SUNDIAL_CONFIG
          value: /etc/sundial/config/config.yaml
        {{- with include "sundial.secretEnv" . }}{{ . | trim | nindent 8 }}{{ end }}
        {{- with .env }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- with .values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      ports:
        - name: metrics
          containerPort: {{ .root.Values.metricsPort }}
          protocol: TCP
        {{- if eq .component "api" }}
        - name: api
          containerPort: {{ .values.port }}
          protocol: TCP
        {{- end }}
      # /healthz answers while the process serves; /readyz once every
      # component has started and while its backends answer (a dispatcher:
      # while it owns a shard).
      startupProbe:
        httpGet: {path: /healthz, port: metrics}
        periodSeconds: 2
        failureThreshold: 30
      livenessProbe:
        httpGet: {path: /healthz, port: metrics}
        periodSeconds: 10
        timeoutSeconds: 5
        failureThreshold: 3
      readinessProbe:
        httpGet: {path: /readyz, port: metrics}
        periodSeconds: 5
        timeoutSeconds: 5
        failureThreshold: 3
      resources:
        {{- toYaml .values.resources | nindent 8 }}
      securityContext:
        {{- toYaml .root.Values.securityContext | nindent 8 }}
      volumeMounts:
        - {name: config, mountPath: /etc/sundial/config, readOnly: true}
        - {name: tmp, mountPath: /tmp}
        {{- with include "sundial.secretMounts" . }}{{ . | trim | nindent 8 }}{{ end }}
  volumes:
    - name: config
      configMap:
        name: {{ include "sundial.fullname" .root }}
        items: [{key: {{ printf "%s.yaml" .component | quote }}, path: config.yaml}]
    - name: tmp
      emptyDir: {sizeLimit: 64Mi}
    {{- with include "sundial.secretVolumes" . }}{{ . | trim | nindent 4 }}{{ end }}
  {{- with .values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{/* The components that run, with their subcommand and backends. */}}
{{- define "sundial.components" -}}
{{- $v := .Values -}}
{{- $all := list -}}
{{- $all = append $all (dict "component" "registry" "values" $v.registry "args" (list "registry") "uses" (list "kafka" "cassandra")) -}}
{{- $all = append $all (dict "component" "dispatcher" "values" $v.dispatcher "args" (list "dispatcher") "uses" (list "kafka" "cassandra")) -}}
{{- $all = append $all (dict "component" "runner" "values" $v.runner "args" (list "runner") "uses" (list "kafka" "cassandra" "redis")) -}}
{{- if $v.dagEngine.enabled -}}
{{- $all = append $all (dict "component" "dagengine" "values" $v.dagEngine "args" (list "dag" "engine") "uses" (list "kafka" "cassandra")) -}}
{{- end -}}
{{- if $v.history.enabled -}}
{{- $all = append $all (dict "component" "history" "values" $v.history "args" (list "history") "uses" (list "kafka" "cassandra")) -}}
{{- end -}}
{{- if $v.api.enabled -}}
{{- $all = append $all (dict "component" "api" "values" $v.api "args" (list "api") "uses" (list "kafka" "cassandra" "redis")) -}}
{{- end -}}
{{- toJson (dict "items" $all) -}}
{{- end -}}
