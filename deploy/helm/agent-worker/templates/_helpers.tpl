{{/*
Names.
*/}}
{{- define "agent-worker.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "agent-worker.fullname" -}}
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

{{- define "agent-worker.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels. Every object carries agent-worker.labels (the `helm test` pod
agent-worker.testLabels); selectors use agent-worker.selectorLabels.
*/}}
{{- define "agent-worker.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agent-worker.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The labels every object shares, selector labels aside.
*/}}
{{- define "agent-worker.commonLabels" -}}
helm.sh/chart: {{ include "agent-worker.chart" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: agent-worker
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "agent-worker.labels" -}}
{{ include "agent-worker.commonLabels" . }}
{{ include "agent-worker.selectorLabels" . }}
app.kubernetes.io/component: worker
{{- end }}

{{/*
The `helm test` pod's labels. Not the worker's selector labels: the
Service and the PodDisruptionBudget must not select it. The NetworkPolicy
lets pods with agent-worker.testSelectorLabels in.
*/}}
{{- define "agent-worker.testSelectorLabels" -}}
app.kubernetes.io/name: {{ include "agent-worker.name" . }}-test
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: test
{{- end }}

{{- define "agent-worker.testLabels" -}}
{{ include "agent-worker.commonLabels" . }}
{{ include "agent-worker.testSelectorLabels" . }}
{{- end }}

{{/*
The image: repository@digest when image.digest is set, else
repository:tag, the tag defaulting to the chart's appVersion.
*/}}
{{- define "agent-worker.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The pods' ServiceAccount.
*/}}
{{- define "agent-worker.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "agent-worker.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The Secret holding the API token, and its key.
*/}}
{{- define "agent-worker.tokenSecretName" -}}
{{- default (printf "%s-token" (include "agent-worker.fullname" .)) .Values.apiToken.existingSecret }}
{{- end }}

{{- define "agent-worker.tokenSecretKey" -}}
{{- default "token" .Values.apiToken.key }}
{{- end }}

{{/*
The worker's config as the ConfigMap holds it: .Values.config, with
seal.key_file pointing at the mounted seal key (sealKey.existingSecret)
unless config.seal names a key itself.
*/}}
{{- define "agent-worker.configYAML" -}}
{{- $cfg := deepCopy .Values.config }}
{{- $seal := dig "seal" (dict) $cfg }}
{{- if and .Values.sealKey.existingSecret (not (or $seal.key_file $seal.key_env)) }}
{{- $_ := set $cfg "seal" (merge (dict "key_file" "/etc/agent-worker-seal/key") $seal) }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{- define "agent-worker.pvcName" -}}
{{- default (printf "%s-data" (include "agent-worker.fullname" .)) .Values.persistence.existingClaim }}
{{- end }}

{{/*
"true" when the worker runs its embedded NATS server (config.nats.url "").
*/}}
{{- define "agent-worker.embeddedNats" -}}
{{- if not (dig "nats" "url" "" .Values.config) }}true{{ end }}
{{- end }}

{{/*
"true" when config.store.url is a Redis URL (redis:// or rediss://).
*/}}
{{- define "agent-worker.redisStore" -}}
{{- if regexMatch "^rediss?://" (toString (dig "store" "url" "" .Values.config)) }}true{{ end }}
{{- end }}

{{/*
A probe: the chart's handler (dict "path" on port http) and the timings
of dict "probe" from values, without its "enabled" switch.
*/}}
{{- define "agent-worker.probe" -}}
httpGet:
  path: {{ .path }}
  port: http
{{- with omit .probe "enabled" }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The pods' topology spread constraints: the values' entries (one without a
labelSelector selects this release's pods), or, with more than one
replica and no entries, a soft spread over nodes.
*/}}
{{- define "agent-worker.topologySpreadConstraints" -}}
{{- $selector := dict "matchLabels" (include "agent-worker.selectorLabels" . | fromYaml) }}
{{- $out := list }}
{{- range .Values.topologySpreadConstraints }}
{{- $c := deepCopy . }}
{{- if not $c.labelSelector }}
{{- $_ := set $c "labelSelector" $selector }}
{{- end }}
{{- $out = append $out $c }}
{{- end }}
{{- if and (not $out) (gt (int .Values.replicaCount) 1) }}
{{- $out = list (dict "maxSkew" 1 "topologyKey" "kubernetes.io/hostname" "whenUnsatisfiable" "ScheduleAnyway" "labelSelector" $selector "matchLabelKeys" (list "pod-template-hash")) }}
{{- end }}
{{- with $out }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/*
The label matchers that pick this release's series in the PrometheusRule,
in place of job="agent-worker" in files/rules.yaml.
*/}}
{{- define "agent-worker.ruleSelector" -}}
{{- default (printf "job=%q, namespace=%q" (include "agent-worker.fullname" .) .Release.Namespace) .Values.prometheusRule.selector }}
{{- end }}

{{/*
"true" when a host:port names only the pod itself (127.x, ::1, localhost).
*/}}
{{- define "agent-worker.isLoopback" -}}
{{- $host := regexReplaceAll ":[^:]*$" (toString .) "" | trimPrefix "[" | trimSuffix "]" | lower }}
{{- if or (eq $host "localhost") (hasPrefix "127." $host) (eq $host "::1") }}true{{ end }}
{{- end }}

{{/*
The port of config.api.listen: the container port "http".
*/}}
{{- define "agent-worker.apiPort" -}}
{{- regexFind "[0-9]+$" (toString (dig "api" "listen" "" .Values.config)) | default "8080" }}
{{- end }}

{{/*
config.shutdown_grace in whole seconds, or "" when it is not written as
hours/minutes/seconds (the check is then left to the operator).
*/}}
{{- define "agent-worker.shutdownGraceSeconds" -}}
{{- $g := toString (dig "shutdown_grace" "30s" .Values.config) }}
{{- if eq $g "0" }}0
{{- else if regexMatch "^([0-9]+h)?([0-9]+m)?([0-9]+s)?$" $g }}
{{- $h := regexFind "[0-9]+h" $g | trimSuffix "h" | default "0" | int }}
{{- $m := regexFind "[0-9]+m" $g | trimSuffix "m" | default "0" | int }}
{{- $s := regexFind "[0-9]+s" $g | trimSuffix "s" | default "0" | int }}
{{- add (mul $h 3600) (mul $m 60) $s }}
{{- end }}
{{- end }}

{{/*
Checks what a pod needs from config and values; fails the render with the
reason otherwise.
*/}}
{{- define "agent-worker.validate" -}}
{{- $cfg := .Values.config }}
{{- if not (kindIs "map" $cfg) }}
{{- fail "config must be a map: the worker's config.yaml" }}
{{- end }}
{{- if and .Values.apiToken.existingSecret .Values.apiToken.value }}
{{- fail "apiToken: set either apiToken.existingSecret or apiToken.value, not both" }}
{{- end }}
{{- if not (or .Values.apiToken.existingSecret .Values.apiToken.value) }}
{{- fail "apiToken: the operator API needs a token, and the chart does not generate one (a random token would change on every render). Set apiToken.existingSecret to a Secret you manage (key apiToken.key; e.g. kubectl create secret generic agent-worker-token --from-literal=token=$(openssl rand -hex 32)), or apiToken.value (e.g. --set-string apiToken.value=$(openssl rand -hex 32))" }}
{{- end }}
{{- if and .Values.apiToken.value (lt (len .Values.apiToken.value) 16) }}
{{- fail "apiToken.value is shorter than 16 characters: use a random token, e.g. --set-string apiToken.value=$(openssl rand -hex 32)" }}
{{- end }}
{{- $listen := toString (dig "api" "listen" "" $cfg) }}
{{- if not $listen }}
{{- fail "config.api.listen is not set: the worker's default 127.0.0.1:8080 is unreachable for the probes and the Service; set 0.0.0.0:8080" }}
{{- end }}
{{- if include "agent-worker.isLoopback" $listen }}
{{- fail (printf "config.api.listen %q is loopback: the probes and the Service reach the pod IP; set 0.0.0.0:%s" $listen (include "agent-worker.apiPort" .)) }}
{{- end }}
{{- if not (regexMatch ":[0-9]+$" $listen) }}
{{- fail (printf "config.api.listen %q: want host:port, e.g. 0.0.0.0:8080" $listen) }}
{{- end }}
{{- if not (dig "api" "tokens" (list) $cfg) }}
{{- fail "config.api.tokens is empty: the worker refuses to serve its API beyond loopback without a token (keep the default ops token, value_env AGENT_WORKER_TOKEN)" }}
{{- end }}
{{- $dataDir := toString (dig "data_dir" "./data" $cfg) }}
{{- if not (or (eq (clean $dataDir) "/data") (hasPrefix "/data/" (clean $dataDir))) }}
{{- fail (printf "config.data_dir %q: must be /data or below it (the root filesystem is read-only; /data is the data volume)" $dataDir) }}
{{- end }}
{{- $embedded := include "agent-worker.embeddedNats" . }}
{{- if and (gt (int .Values.replicaCount) 1) (or $embedded .Values.persistence.enabled) }}
{{- fail "replicaCount > 1 needs an external NATS (config.nats.url) and persistence.enabled false: each replica would otherwise run its own NATS with its own state" }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) (hasPrefix "memory:" (toString (dig "store" "url" "" $cfg))) }}
{{- fail "replicaCount > 1 needs a store every replica shares: config.store.url memory:// keeps each replica's state in its own process (leave it unset for JetStream KV on config.nats.url, or use redis://)" }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.sealKey.existingSecret) }}
{{- fail "replicaCount > 1 needs sealKey.existingSecret: every replica must hold the same seal key, from a Secret you manage (kubectl create secret generic agent-worker-seal --from-literal=key=$(head -c 32 /dev/urandom | base64))" }}
{{- end }}
{{- if and .Values.service.exposeNats $embedded }}
{{- $natsListen := toString (dig "nats" "listen" "127.0.0.1:4222" $cfg) }}
{{- if or (include "agent-worker.isLoopback" $natsListen) (not (hasSuffix (printf ":%v" (int .Values.service.natsPort)) $natsListen)) }}
{{- fail (printf "service.exposeNats needs config.nats.listen on 0.0.0.0:%v, got %q" (int .Values.service.natsPort) $natsListen) }}
{{- end }}
{{- $nats := dig "nats" (dict) $cfg }}
{{- if not (or $nats.token_env $nats.token_file $nats.nkey_file (and $nats.user (or $nats.password_env $nats.password_file))) }}
{{- fail "service.exposeNats needs authentication on the embedded NATS server: set config.nats.token_env (with the token in secretEnv) or token_file, user with password_env/password_file, or nkey_file; the worker refuses to serve NATS beyond loopback without it" }}
{{- end }}
{{- end }}
{{- $grace := include "agent-worker.shutdownGraceSeconds" . }}
{{- if and $grace (ge (int $grace) (int .Values.terminationGracePeriodSeconds)) }}
{{- fail (printf "terminationGracePeriodSeconds (%v) must be above config.shutdown_grace (%ss): the kubelet would kill running turns before their grace ends" .Values.terminationGracePeriodSeconds $grace) }}
{{- end }}
{{- range $i, $e := .Values.secretEnv }}
{{- if not (and $e.name $e.secretName $e.key) }}
{{- fail (printf "secretEnv[%d] needs name, secretName and key" $i) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
A NetworkPolicy egress rule from networkPolicy.egress.<target>: TCP to
its ports, towards its cidrs and peers (anywhere when it has neither).
*/}}
{{- define "agent-worker.egressRule" -}}
- ports:
    {{- range .ports }}
    - port: {{ . }}
      protocol: TCP
    {{- end }}
  {{- if or .cidrs .to }}
  to:
    {{- range .cidrs }}
    - ipBlock:
        cidr: {{ . | quote }}
    {{- end }}
    {{- with .to }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
{{- end }}

{{/*
A NetworkPolicy ingress rule from networkPolicy.ingress.<caller>: TCP to
the port http, from the pods its podSelector picks in the namespaces its
namespaceSelector picks (an empty namespaceSelector: the release's
namespace; an empty podSelector: every pod there).
*/}}
{{- define "agent-worker.ingressCaller" -}}
- ports:
    - port: http
      protocol: TCP
  from:
    - podSelector:
        {{- toYaml (.podSelector | default dict) | nindent 8 }}
      {{- with .namespaceSelector }}
      namespaceSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end }}

{{/*
A LabelSelector as text for NOTES: its matchLabels as k=v, or "(release
namespace)" / "(all)" when empty.
*/}}
{{- define "agent-worker.selectorText" -}}
{{- $parts := list }}
{{- range $k, $v := (default dict .).matchLabels }}{{ $parts = append $parts (printf "%s=%s" $k $v) }}{{ end }}
{{- range (default dict .).matchExpressions }}{{ $parts = append $parts (printf "%s %s %v" .key .operator (.values | default list)) }}{{ end }}
{{- if $parts }}{{ join "," $parts }}{{ else }}(any){{ end }}
{{- end }}

{{/*
Who a networkPolicy.ingress.<caller> admits, as text for NOTES; called
with (list caller namespace).
*/}}
{{- define "agent-worker.callerText" -}}
{{- $c := index . 0 }}
{{- printf "pods %s in " (include "agent-worker.selectorText" $c.podSelector) }}
{{- if $c.namespaceSelector }}namespaces {{ include "agent-worker.selectorText" $c.namespaceSelector }}{{ else }}namespace {{ index . 1 }}{{ end }}
{{- end }}
