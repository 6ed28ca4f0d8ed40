{{/*
rdma-doctor.name is the app.kubernetes.io/name label: "rdma_doctor", the
job name the alerts and dashboards select on (the ServiceMonitor takes the
job from it).
*/}}
{{- define "rdma-doctor.name" -}}
{{- default "rdma_doctor" .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* rdma-doctor.fullname names the objects (DNS labels: no underscore). */}}
{{- define "rdma-doctor.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains "rdma-doctor" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-rdma-doctor" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "rdma-doctor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rdma-doctor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "rdma-doctor.labels" -}}
{{ include "rdma-doctor.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* The release label kube-prometheus-stack selects on, and extra labels. */}}
{{- define "rdma-doctor.monitoringLabels" -}}
{{- $l := deepCopy (.extra | default dict) -}}
{{- if .ctx.Values.release }}{{ $_ := set $l "release" .ctx.Values.release }}{{ end -}}
{{- with $l }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{/* rdma_doctor.yml: config, with probe.enabled set by the probe toggle. */}}
{{- define "rdma-doctor.config" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- if .Values.probe.enabled -}}
{{- $probe := get $cfg "probe" | default dict -}}
{{- $_ := set $probe "enabled" true -}}
{{- $_ := set $cfg "probe" $probe -}}
{{- end -}}
{{- if $cfg -}}
{{ toYaml $cfg }}
{{- else -}}
# Every default applies (deploy/rdma_doctor.example.yml documents each key).
{{- end -}}
{{- end -}}

{{/*
rdma-doctor.pod is the pod template of a DaemonSet: .ctx is the root
context, .fabric is true for the fabric view's DaemonSet. What each toggle
needs:
  tools (infiniband-diags, perftest): sminfo, probe, fabric
  RDMA devices (device plugin + /host/dev/infiniband): sminfo, probe, fabric
  root (umad devices are root's, the root-only reads): sminfo, fabric, rootReads
  privileged (/dev/kmsg, full PCI config space): rootReads
*/}}
{{- define "rdma-doctor.pod" -}}
{{- $v := .ctx.Values -}}
{{- $tools := or $v.sminfo.enabled $v.probe.enabled .fabric -}}
{{- $devices := $tools -}}
{{- $root := or $v.sminfo.enabled .fabric $v.rootReads.enabled -}}
{{- $privileged := $v.rootReads.enabled -}}
{{- $tag := default .ctx.Chart.AppVersion $v.image.tag -}}
{{- if $tools }}{{ $tag = printf "%s%s" $tag $v.image.toolsSuffix }}{{ end -}}
{{- /* The fabric view has limits of its own: its memory grows with the fabric (values.yaml, fabric.resources). */ -}}
{{- $resources := deepCopy (ternary $v.fabric.resources $v.resources .fabric) -}}
{{- if $devices -}}
{{- $limits := get $resources "limits" | default dict -}}
{{- /* A quantity: a string, as the API schema has it. */ -}}
{{- $_ := set $limits $v.rdmaDevices.resource (toString $v.rdmaDevices.count) -}}
{{- $_ := set $resources "limits" $limits -}}
{{- end -}}
metadata:
  labels:
    {{- include "rdma-doctor.selectorLabels" .ctx | nindent 4 }}
    app.kubernetes.io/component: {{ ternary "fabric" "exporter" .fabric }}
    {{- with $v.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    checksum/config: {{ include "rdma-doctor.config" .ctx | sha256sum }}
    {{- with $v.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "rdma-doctor.fullname" .ctx }}
  automountServiceAccountToken: false
  hostNetwork: {{ $v.hostNetwork }}
  {{- if $v.hostNetwork }}
  dnsPolicy: ClusterFirstWithHostNet
  {{- end }}
  # The host's /proc mounted at /host/proc shows the host's processes
  # (a procfs lists the PID namespace it was mounted in), so finding
  # irqbalance, OpenSM and the job launchers needs no hostPID.
  hostPID: false
  {{- with $v.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- with $v.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- $nodeSelector := deepCopy $v.nodeSelector -}}
  {{- if $v.nfd.enabled }}{{ $_ := set $nodeSelector $v.nfd.label "true" }}{{ end -}}
  {{- if .fabric }}{{ $nodeSelector = merge (deepCopy $v.fabric.nodeSelector) $nodeSelector }}{{ end }}
  {{- with $nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- $affinity := deepCopy $v.affinity -}}
  {{- if and $v.fabric.enabled (not .fabric) -}}
  {{- if hasKey $affinity "nodeAffinity" -}}
  {{- fail "fabric.enabled: the main DaemonSet's nodeAffinity leaves the fabric nodes out; move affinity.nodeAffinity into nodeSelector" -}}
  {{- end -}}
  {{- /* Terms are ORed: a node runs the main pod unless it has every fabric label. */ -}}
  {{- $terms := list -}}
  {{- range $k, $val := $v.fabric.nodeSelector -}}
  {{- $terms = append $terms (dict "matchExpressions" (list (dict "key" $k "operator" "NotIn" "values" (list $val)))) -}}
  {{- end -}}
  {{- $_ := set $affinity "nodeAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (dict "nodeSelectorTerms" $terms)) -}}
  {{- end }}
  {{- with $affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- if $root }}
    runAsNonRoot: false
    runAsUser: 0
    runAsGroup: 0
    {{- else }}
    runAsNonRoot: true
    runAsUser: 65534
    runAsGroup: 65534
    {{- end }}
    seccompProfile:
      type: RuntimeDefault
  containers:
    - name: rdma-doctor
      image: {{ printf "%s:%s" $v.image.repository $tag | quote }}
      imagePullPolicy: {{ $v.image.pullPolicy }}
      args:
        - --path.rootfs=/host
        - --web.listen-address=:{{ $v.port }}
        - --config.file=/etc/rdma_doctor/rdma_doctor.yml
        - --log.level={{ $v.logLevel }}
        {{- if .fabric }}
        - --collector.fabric
        - --collector.fabric.interval={{ $v.fabric.interval }}
        {{- end }}
        {{- range $v.extraArgs }}
        - {{ . | quote }}
        {{- end }}
      ports:
        - name: metrics
          containerPort: {{ $v.port }}
          {{- if $v.hostNetwork }}
          hostPort: {{ $v.port }}
          {{- end }}
          protocol: TCP
      readinessProbe:
        httpGet:
          path: /
          port: metrics
        periodSeconds: 30
      livenessProbe:
        httpGet:
          path: /
          port: metrics
        periodSeconds: 60
        failureThreshold: 5
      {{- with $resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        readOnlyRootFilesystem: true
        {{- if $privileged }}
        privileged: true
        {{- else }}
        privileged: false
        allowPrivilegeEscalation: false
        capabilities:
          drop: [ALL]
          {{- if $v.probe.enabled }}
          add: [IPC_LOCK]
          {{- end }}
        {{- end }}
      volumeMounts:
        - name: sys
          mountPath: /host/sys
          readOnly: true
          mountPropagation: HostToContainer
        - name: proc
          mountPath: /host/proc
          readOnly: true
        {{- if $v.kernelConfig.enabled }}
        - name: boot
          mountPath: /host/boot
          readOnly: true
        {{- end }}
        {{- if $devices }}
        - name: infiniband
          mountPath: /host/dev/infiniband
          readOnly: true
        {{- end }}
        {{- if $privileged }}
        - name: kmsg
          mountPath: /host/dev/kmsg
          readOnly: true
        {{- end }}
        - name: config
          mountPath: /etc/rdma_doctor
          readOnly: true
  volumes:
    - name: sys
      hostPath:
        path: /sys
        type: Directory
    - name: proc
      hostPath:
        path: /proc
        type: Directory
    {{- if $v.kernelConfig.enabled }}
    # The kernel configuration, /boot/config-<release>: GPUDirect DMA-BUF
    # readiness reads CONFIG_PCI_P2PDMA from it (docs/gpu.md).
    - name: boot
      hostPath:
        path: /boot
        type: Directory
    {{- end }}
    {{- if $devices }}
    - name: infiniband
      hostPath:
        path: /dev/infiniband
        type: Directory
    {{- end }}
    {{- if $privileged }}
    - name: kmsg
      hostPath:
        path: /dev/kmsg
        type: CharDevice
    {{- end }}
    - name: config
      configMap:
        name: {{ include "rdma-doctor.fullname" .ctx }}
{{- end -}}
