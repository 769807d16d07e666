{{/* Labels on every object's metadata (never on selectors: those stay as in manifests/base). */}}
{{- define "ve.labels" -}}
app.kubernetes.io/part-of: volcano-elastic
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "ve.annotations" -}}
{{- with .Values.commonAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "ve.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) -}}
{{- end -}}

{{- define "ve.imagePullPolicy" -}}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end -}}

{{- define "ve.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* nodeSelector, tolerations, affinity, priorityClassName of one workload's values */}}
{{- define "ve.scheduling" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}

{{- define "ve.podSecurityContext" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- end -}}

{{- define "ve.containerSecurityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: [ALL]
{{- end -}}

{{/* The ElasticConfig file both Deployments mount. */}}
{{- define "ve.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- if not (include "ve.podDeletes" .) -}}
{{- $_ := set $config "agent" (merge (dict "passPdb" false) (omit $config.agent "passPdb")) -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/* "true" when the controller may delete pods (issue 36, T13): config.agent.passPdb asks for it and
the admission policy that bounds the grant (volcano-elastic-controller-pod-deletes) is rendered. */}}
{{- define "ve.podDeletes" -}}
{{- if and .Values.admissionPolicy.enabled (ne (toString (dig "agent" "passPdb" true .Values.config)) "false") -}}
true
{{- end -}}
{{- end -}}

{{- define "ve.validate" -}}
{{- $modes := list "certgen" "cert-manager" "external" -}}
{{- if not (has .Values.certs.mode $modes) -}}
{{- fail (printf "certs.mode must be one of %s, not %q" (join ", " $modes) .Values.certs.mode) -}}
{{- end -}}
{{- if and .Values.admission.url (ne .Values.certs.mode "external") -}}
{{- fail "admission.url (a webhook outside the cluster) needs certs.mode=external and admission.caBundle" -}}
{{- end -}}
{{- if and .Values.admission.caBundle (ne .Values.certs.mode "external") -}}
{{- fail "admission.caBundle is only used with certs.mode=external (certgen and cert-manager inject it)" -}}
{{- end -}}
{{- if and .Values.admission.url .Values.webhook.enabled -}}
{{- fail "admission.url points the webhook configurations away from the in-cluster webhook: set webhook.enabled=false" -}}
{{- end -}}
{{- if not (has .Values.admission.failurePolicy (list "Fail" "Ignore")) -}}
{{- fail (printf "admission.failurePolicy must be Fail or Ignore, not %q" .Values.admission.failurePolicy) -}}
{{- end -}}
{{- end -}}


{{/* The certgen pod (install-time Job and renewal CronJob). */}}
{{- define "ve.certgenPod" -}}
metadata:
  labels:
    app.kubernetes.io/name: volcano-elastic-certgen
    app.kubernetes.io/component: certgen
spec:
  serviceAccountName: volcano-elastic-certgen
  restartPolicy: OnFailure
  {{- with (include "ve.imagePullSecrets" .) }}{{ . | trim | nindent 2 }}{{- end }}
  {{- include "ve.podSecurityContext" . | nindent 2 }}
  containers:
  - name: certgen
    image: {{ include "ve.image" . }}
    {{- with (include "ve.imagePullPolicy" .) }}{{ . | trim | nindent 4 }}{{- end }}
    args:
    - certs
    - bootstrap
    env:
    - name: POD_NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
    - name: SECRET_NAME
      value: volcano-elastic-webhook-tls
    - name: SERVICE_NAME
      value: volcano-elastic-webhook
    - name: WEBHOOK_CONFIGURATION
      value: volcano-elastic
    - name: MUTATING_WEBHOOKS
      value: mutate-pods.volcano-elastic.io
    - name: VALIDATING_WEBHOOKS
      value: validate-pytorchjobs.volcano-elastic.io
    - name: CERT_DAYS
      value: {{ .Values.certs.certgen.days | quote }}
    - name: RENEW_BEFORE_DAYS
      value: {{ .Values.certs.certgen.renewBeforeDays | quote }}
    resources:
      {{- toYaml .Values.certs.certgen.resources | nindent 6 }}
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities:
        drop:
        - ALL
    volumeMounts:
    - name: tmp
      mountPath: /tmp
  volumes:
  - name: tmp
    emptyDir:
      medium: Memory
      sizeLimit: 16Mi
{{- end -}}

{{/* clientConfig of one webhook: the Service, or admission.url. */}}
{{- define "ve.clientConfig" -}}
{{- if .root.Values.admission.url }}
clientConfig:
  url: {{ printf "%s%s" (trimSuffix "/" .root.Values.admission.url) .path }}
  {{- with .root.Values.admission.caBundle }}
  caBundle: {{ . | b64enc }}
  {{- end }}
{{- else }}
clientConfig:
  service:
    name: volcano-elastic-webhook
    namespace: {{ .root.Release.Namespace }}
    path: {{ .path }}
    port: 443
  {{- with .root.Values.admission.caBundle }}
  caBundle: {{ . | b64enc }}
  {{- end }}
{{- end }}
{{- end -}}

{{/* NetworkPolicy peers: every address but the pod network (networkPolicy values), per family
given; a family without pod CIDRs is not admitted. */}}
{{- define "ve.nonPodPeers" -}}
{{- if not (or .podCIDRs.ipv4 .podCIDRs.ipv6) -}}
{{- fail "networkPolicy.enabled needs networkPolicy.podCIDRs.ipv4 and/or .ipv6: your cluster's pod network (kubectl get nodes -o jsonpath='{.items[*].spec.podCIDRs}'); there is no default because a wrong one admits every pod (docs/install.md)" -}}
{{- end -}}
{{- with .podCIDRs.ipv4 }}
- ipBlock:
    cidr: 0.0.0.0/0
    except: {{ toJson . }}
{{- end }}
{{- with .podCIDRs.ipv6 }}
- ipBlock:
    cidr: ::/0
    except: {{ toJson . }}
{{- end }}
{{- end -}}

{{/* The identities the tenant policy does not check (tenant-policy.yaml), as a CEL list. */}}
{{- define "ve.tenantTrustedUsers" -}}
{{- $sa := printf "system:serviceaccount:%s:" .Release.Namespace -}}
{{- concat (list (printf "%svolcano-elastic-controller" $sa) (printf "%svolcano-elastic-release-gates" $sa)) .Values.tenantPolicy.trustedUsers | toJson -}}
{{- end -}}
