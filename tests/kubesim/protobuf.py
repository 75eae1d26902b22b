"""Decode the protobuf request bodies that kubectl sends to the API server.

kubectl's `create <generator>` commands (configmap, namespace, job --from=cronjob/..., deployment, secret,
service, poddisruptionbudget, priorityclass, ...) POST with `Content-Type: application/vnd.kubernetes.protobuf`
and do not fall back to JSON. Such a body is the 4-byte magic ``k8s\\x00`` followed by a ``runtime.Unknown``
message: typeMeta (apiVersion, kind), raw (the object's own protobuf encoding), contentEncoding, contentType.

``decode_object(body)`` turns that into the dict the JSON API would carry for the same object, so the
simulator can treat it like a JSON body:

* field names are the JSON names; Go-embedded (``json:",inline"``) structs are merged into their parent, e.g.
  a Volume's source (``{"name": ..., "configMap": {...}}``), a Probe's handler, the ``name`` of
  ConfigMapKeySelector/ConfigMapVolumeSource/SecretKeySelector/..., an IngressRule's ``http``;
* Quantity -> string (``"500m"``), IntOrString -> int or string, meta/v1 Time -> RFC 3339 string
  (``"2026-01-02T03:04:05Z"``, whole seconds, like the JSON encoding), FieldsV1 -> the JSON object it holds,
  bytes (Secret ``data``, ConfigMap ``binaryData``) -> base64 strings, maps -> dicts;
* unset fields are omitted. The Go encoder writes every non-pointer field, so a scalar that holds its zero
  value ("", 0, false) is dropped unless the schema marks it ``?`` (a pointer field, e.g. ``replicas: 0``,
  ``optional: false``, or one the JSON encoding always writes, e.g. PriorityClass ``value``). A zero Time
  (``creationTimestamp: null`` in JSON) is omitted too. A nested message that is present is kept even when
  empty (``emptyDir: {}``, ``resources: {}``, ``status: {}``), as the JSON encoding writes it.

Only the kinds in the schema below are decoded fully: v1 ConfigMap, Secret, Namespace, Service,
ServiceAccount, ResourceQuota, Pod; batch/v1 Job, CronJob; apps/v1 Deployment, ReplicaSet, DaemonSet,
StatefulSet; policy/v1 PodDisruptionBudget; scheduling.k8s.io/v1 PriorityClass; rbac.authorization.k8s.io/v1
Role, ClusterRole, RoleBinding, ClusterRoleBinding; networking.k8s.io/v1 Ingress; authentication.k8s.io/v1
TokenRequest (``kubectl create token``). For any other apiVersion/kind the result holds apiVersion, kind and
metadata (field 1, which is ObjectMeta in every Kubernetes object) and nothing else. Fields the schema does
not list (newer Kubernetes versions) are skipped, not an error. Malformed input raises ``ValueError``.

Field numbers and names come from Kubernetes' generated.proto files (k8s.io/api and k8s.io/apimachinery as
built into kubectl 1.32/1.33).
"""
from __future__ import annotations

import base64
import json
from datetime import datetime, timezone

__all__ = ["decode_object"]

MAGIC = b"k8s\x00"
PROTOBUF_CONTENT_TYPE = "application/vnd.kubernetes.protobuf"

# The message schemas. `[section apiVersion] kinds: K1 K2` starts a section and names the top-level kinds
# decode_object() knows in it; every other line (continuation lines are indented) is
# `Message field field ...` with each field written `number:jsonName:type`:
#   type      str, int (int32/int64), bool, bytes; Time, Quantity, IntOrString, FieldsV1 (see _BUILTINS);
#             or a message name, looked up in the same section, then in core, then in meta;
#   []type    a repeated field; {type} a map with string keys;
#   ?         suffix: keep the value even when it is the zero value ("", 0, false), see the module docstring;
#   ^         as the JSON name: a Go-embedded struct whose fields are merged into the enclosing object.
_SCHEMA = """
[runtime]
TypeMeta 1:apiVersion:str 2:kind:str
Unknown 1:typeMeta:TypeMeta 2:raw:bytes? 3:contentEncoding:str 4:contentType:str
[meta]
Condition 1:type:str 2:status:str 3:observedGeneration:int 4:lastTransitionTime:Time 5:reason:str 6:message:str
LabelSelector 1:matchLabels:{str} 2:matchExpressions:[]LabelSelectorRequirement
LabelSelectorRequirement 1:key:str 2:operator:str 3:values:[]str
ManagedFieldsEntry 1:manager:str 2:operation:str 3:apiVersion:str 4:time:Time 6:fieldsType:str 7:fieldsV1:FieldsV1
    8:subresource:str
ObjectMeta 1:name:str 2:generateName:str 3:namespace:str 4:selfLink:str 5:uid:str 6:resourceVersion:str
    7:generation:int 8:creationTimestamp:Time 9:deletionTimestamp:Time 10:deletionGracePeriodSeconds:int?
    11:labels:{str} 12:annotations:{str} 13:ownerReferences:[]OwnerReference 14:finalizers:[]str
    17:managedFields:[]ManagedFieldsEntry
OwnerReference 1:kind:str 3:name:str 4:uid:str 5:apiVersion:str 6:controller:bool? 7:blockOwnerDeletion:bool?
[core v1] kinds: ConfigMap Namespace Pod ResourceQuota Secret Service ServiceAccount
AWSElasticBlockStoreVolumeSource 1:volumeID:str 2:fsType:str 3:partition:int 4:readOnly:bool
Affinity 1:nodeAffinity:NodeAffinity 2:podAffinity:PodAffinity 3:podAntiAffinity:PodAntiAffinity
AppArmorProfile 1:type:str 2:localhostProfile:str?
AzureDiskVolumeSource 1:diskName:str 2:diskURI:str 3:cachingMode:str? 4:fsType:str? 5:readOnly:bool? 6:kind:str?
AzureFileVolumeSource 1:secretName:str 2:shareName:str 3:readOnly:bool
CSIVolumeSource 1:driver:str 2:readOnly:bool? 3:fsType:str? 4:volumeAttributes:{str}
    5:nodePublishSecretRef:LocalObjectReference
Capabilities 1:add:[]str 2:drop:[]str
CephFSVolumeSource 1:monitors:[]str 2:path:str 3:user:str 4:secretFile:str 5:secretRef:LocalObjectReference
    6:readOnly:bool
CinderVolumeSource 1:volumeID:str 2:fsType:str 3:readOnly:bool 4:secretRef:LocalObjectReference
ClientIPConfig 1:timeoutSeconds:int?
ClusterTrustBundleProjection 1:name:str? 2:signerName:str? 3:labelSelector:LabelSelector 4:path:str 5:optional:bool?
ConfigMap 1:metadata:ObjectMeta 2:data:{str} 3:binaryData:{bytes} 4:immutable:bool?
ConfigMapEnvSource 1:^:LocalObjectReference 2:optional:bool?
ConfigMapKeySelector 1:^:LocalObjectReference 2:key:str 3:optional:bool?
ConfigMapProjection 1:^:LocalObjectReference 2:items:[]KeyToPath 4:optional:bool?
ConfigMapVolumeSource 1:^:LocalObjectReference 2:items:[]KeyToPath 3:defaultMode:int? 4:optional:bool?
Container 1:name:str 2:image:str 3:command:[]str 4:args:[]str 5:workingDir:str 6:ports:[]ContainerPort
    7:env:[]EnvVar 8:resources:ResourceRequirements 9:volumeMounts:[]VolumeMount 10:livenessProbe:Probe
    11:readinessProbe:Probe 12:lifecycle:Lifecycle 13:terminationMessagePath:str 14:imagePullPolicy:str
    15:securityContext:SecurityContext 16:stdin:bool 17:stdinOnce:bool 18:tty:bool 19:envFrom:[]EnvFromSource
    20:terminationMessagePolicy:str 21:volumeDevices:[]VolumeDevice 22:startupProbe:Probe
    23:resizePolicy:[]ContainerResizePolicy 24:restartPolicy:str?
ContainerPort 1:name:str 2:hostPort:int 3:containerPort:int? 4:protocol:str 5:hostIP:str
ContainerResizePolicy 1:resourceName:str 2:restartPolicy:str
ContainerState 1:waiting:ContainerStateWaiting 2:running:ContainerStateRunning 3:terminated:ContainerStateTerminated
ContainerStateRunning 1:startedAt:Time
ContainerStateTerminated 1:exitCode:int? 2:signal:int 3:reason:str 4:message:str 5:startedAt:Time 6:finishedAt:Time
    7:containerID:str
ContainerStateWaiting 1:reason:str 2:message:str
ContainerStatus 1:name:str 2:state:ContainerState 3:lastState:ContainerState 4:ready:bool? 5:restartCount:int?
    6:image:str 7:imageID:str 8:containerID:str 9:started:bool? 10:allocatedResources:{Quantity}
    11:resources:ResourceRequirements 12:volumeMounts:[]VolumeMountStatus 13:user:ContainerUser
    14:allocatedResourcesStatus:[]ResourceStatus 15:stopSignal:str?
ContainerUser 1:linux:LinuxContainerUser
DownwardAPIProjection 1:items:[]DownwardAPIVolumeFile
DownwardAPIVolumeFile 1:path:str 2:fieldRef:ObjectFieldSelector 3:resourceFieldRef:ResourceFieldSelector 4:mode:int?
DownwardAPIVolumeSource 1:items:[]DownwardAPIVolumeFile 2:defaultMode:int?
EmptyDirVolumeSource 1:medium:str 2:sizeLimit:Quantity
EnvFromSource 1:prefix:str 2:configMapRef:ConfigMapEnvSource 3:secretRef:SecretEnvSource
EnvVar 1:name:str 2:value:str 3:valueFrom:EnvVarSource
EnvVarSource 1:fieldRef:ObjectFieldSelector 2:resourceFieldRef:ResourceFieldSelector
    3:configMapKeyRef:ConfigMapKeySelector 4:secretKeyRef:SecretKeySelector
EphemeralContainer 1:^:EphemeralContainerCommon 2:targetContainerName:str
EphemeralContainerCommon 1:name:str 2:image:str 3:command:[]str 4:args:[]str 5:workingDir:str
    6:ports:[]ContainerPort 7:env:[]EnvVar 8:resources:ResourceRequirements 9:volumeMounts:[]VolumeMount
    10:livenessProbe:Probe 11:readinessProbe:Probe 12:lifecycle:Lifecycle 13:terminationMessagePath:str
    14:imagePullPolicy:str 15:securityContext:SecurityContext 16:stdin:bool 17:stdinOnce:bool 18:tty:bool
    19:envFrom:[]EnvFromSource 20:terminationMessagePolicy:str 21:volumeDevices:[]VolumeDevice 22:startupProbe:Probe
    23:resizePolicy:[]ContainerResizePolicy 24:restartPolicy:str?
EphemeralVolumeSource 1:volumeClaimTemplate:PersistentVolumeClaimTemplate
ExecAction 1:command:[]str
FCVolumeSource 1:targetWWNs:[]str 2:lun:int? 3:fsType:str 4:readOnly:bool 5:wwids:[]str
FlexVolumeSource 1:driver:str 2:fsType:str 3:secretRef:LocalObjectReference 4:readOnly:bool 5:options:{str}
FlockerVolumeSource 1:datasetName:str 2:datasetUUID:str
GCEPersistentDiskVolumeSource 1:pdName:str 2:fsType:str 3:partition:int 4:readOnly:bool
GRPCAction 1:port:int 2:service:str?
GitRepoVolumeSource 1:repository:str 2:revision:str 3:directory:str
GlusterfsVolumeSource 1:endpoints:str 2:path:str 3:readOnly:bool
HTTPGetAction 1:path:str 2:port:IntOrString 3:host:str 4:scheme:str 5:httpHeaders:[]HTTPHeader
HTTPHeader 1:name:str 2:value:str
HostAlias 1:ip:str 2:hostnames:[]str
HostIP 1:ip:str
HostPathVolumeSource 1:path:str 2:type:str?
ISCSIVolumeSource 1:targetPortal:str 2:iqn:str 3:lun:int 4:iscsiInterface:str 5:fsType:str 6:readOnly:bool
    7:portals:[]str 8:chapAuthDiscovery:bool 10:secretRef:LocalObjectReference 11:chapAuthSession:bool
    12:initiatorName:str?
ImageVolumeSource 1:reference:str 2:pullPolicy:str
KeyToPath 1:key:str 2:path:str 3:mode:int?
Lifecycle 1:postStart:LifecycleHandler 2:preStop:LifecycleHandler 3:stopSignal:str?
LifecycleHandler 1:exec:ExecAction 2:httpGet:HTTPGetAction 3:tcpSocket:TCPSocketAction 4:sleep:SleepAction
LinuxContainerUser 1:uid:int 2:gid:int 3:supplementalGroups:[]int
LoadBalancerIngress 1:ip:str 2:hostname:str 3:ipMode:str? 4:ports:[]PortStatus
LoadBalancerStatus 1:ingress:[]LoadBalancerIngress
LocalObjectReference 1:name:str
ModifyVolumeStatus 1:targetVolumeAttributesClassName:str 2:status:str
NFSVolumeSource 1:server:str 2:path:str 3:readOnly:bool
Namespace 1:metadata:ObjectMeta 2:spec:NamespaceSpec 3:status:NamespaceStatus
NamespaceCondition 1:type:str 2:status:str 4:lastTransitionTime:Time 5:reason:str 6:message:str
NamespaceSpec 1:finalizers:[]str
NamespaceStatus 1:phase:str 2:conditions:[]NamespaceCondition
NodeAffinity 1:requiredDuringSchedulingIgnoredDuringExecution:NodeSelector
    2:preferredDuringSchedulingIgnoredDuringExecution:[]PreferredSchedulingTerm
NodeSelector 1:nodeSelectorTerms:[]NodeSelectorTerm
NodeSelectorRequirement 1:key:str 2:operator:str 3:values:[]str
NodeSelectorTerm 1:matchExpressions:[]NodeSelectorRequirement 2:matchFields:[]NodeSelectorRequirement
ObjectFieldSelector 1:apiVersion:str 2:fieldPath:str
ObjectReference 1:kind:str 2:namespace:str 3:name:str 4:uid:str 5:apiVersion:str 6:resourceVersion:str
    7:fieldPath:str
PersistentVolumeClaim 1:metadata:ObjectMeta 2:spec:PersistentVolumeClaimSpec 3:status:PersistentVolumeClaimStatus
PersistentVolumeClaimCondition 1:type:str 2:status:str 3:lastProbeTime:Time 4:lastTransitionTime:Time 5:reason:str
    6:message:str
PersistentVolumeClaimSpec 1:accessModes:[]str 2:resources:VolumeResourceRequirements 3:volumeName:str
    4:selector:LabelSelector 5:storageClassName:str? 6:volumeMode:str? 7:dataSource:TypedLocalObjectReference
    8:dataSourceRef:TypedObjectReference 9:volumeAttributesClassName:str?
PersistentVolumeClaimStatus 1:phase:str 2:accessModes:[]str 3:capacity:{Quantity}
    4:conditions:[]PersistentVolumeClaimCondition 5:allocatedResources:{Quantity} 7:allocatedResourceStatuses:{str}
    8:currentVolumeAttributesClassName:str? 9:modifyVolumeStatus:ModifyVolumeStatus
PersistentVolumeClaimTemplate 1:metadata:ObjectMeta 2:spec:PersistentVolumeClaimSpec
PersistentVolumeClaimVolumeSource 1:claimName:str 2:readOnly:bool
PhotonPersistentDiskVolumeSource 1:pdID:str 2:fsType:str
Pod 1:metadata:ObjectMeta 2:spec:PodSpec 3:status:PodStatus
PodAffinity 1:requiredDuringSchedulingIgnoredDuringExecution:[]PodAffinityTerm
    2:preferredDuringSchedulingIgnoredDuringExecution:[]WeightedPodAffinityTerm
PodAffinityTerm 1:labelSelector:LabelSelector 2:namespaces:[]str 3:topologyKey:str 4:namespaceSelector:LabelSelector
    5:matchLabelKeys:[]str 6:mismatchLabelKeys:[]str
PodAntiAffinity 1:requiredDuringSchedulingIgnoredDuringExecution:[]PodAffinityTerm
    2:preferredDuringSchedulingIgnoredDuringExecution:[]WeightedPodAffinityTerm
PodCondition 1:type:str 2:status:str 3:lastProbeTime:Time 4:lastTransitionTime:Time 5:reason:str 6:message:str
    7:observedGeneration:int
PodDNSConfig 1:nameservers:[]str 2:searches:[]str 3:options:[]PodDNSConfigOption
PodDNSConfigOption 1:name:str 2:value:str?
PodIP 1:ip:str
PodOS 1:name:str
PodReadinessGate 1:conditionType:str
PodResourceClaim 1:name:str 3:resourceClaimName:str? 4:resourceClaimTemplateName:str?
PodResourceClaimStatus 1:name:str 2:resourceClaimName:str?
PodSchedulingGate 1:name:str
PodSecurityContext 1:seLinuxOptions:SELinuxOptions 2:runAsUser:int? 3:runAsNonRoot:bool? 4:supplementalGroups:[]int
    5:fsGroup:int? 6:runAsGroup:int? 7:sysctls:[]Sysctl 8:windowsOptions:WindowsSecurityContextOptions
    9:fsGroupChangePolicy:str? 10:seccompProfile:SeccompProfile 11:appArmorProfile:AppArmorProfile
    12:supplementalGroupsPolicy:str? 13:seLinuxChangePolicy:str?
PodSpec 1:volumes:[]Volume 2:containers:[]Container 3:restartPolicy:str 4:terminationGracePeriodSeconds:int?
    5:activeDeadlineSeconds:int? 6:dnsPolicy:str 7:nodeSelector:{str} 8:serviceAccountName:str 9:serviceAccount:str
    10:nodeName:str 11:hostNetwork:bool 12:hostPID:bool 13:hostIPC:bool 14:securityContext:PodSecurityContext
    15:imagePullSecrets:[]LocalObjectReference 16:hostname:str 17:subdomain:str 18:affinity:Affinity
    19:schedulerName:str 20:initContainers:[]Container 21:automountServiceAccountToken:bool?
    22:tolerations:[]Toleration 23:hostAliases:[]HostAlias 24:priorityClassName:str 25:priority:int?
    26:dnsConfig:PodDNSConfig 27:shareProcessNamespace:bool? 28:readinessGates:[]PodReadinessGate
    29:runtimeClassName:str? 30:enableServiceLinks:bool? 31:preemptionPolicy:str? 32:overhead:{Quantity}
    33:topologySpreadConstraints:[]TopologySpreadConstraint 34:ephemeralContainers:[]EphemeralContainer
    35:setHostnameAsFQDN:bool? 36:os:PodOS 37:hostUsers:bool? 38:schedulingGates:[]PodSchedulingGate
    39:resourceClaims:[]PodResourceClaim 40:resources:ResourceRequirements
PodStatus 1:phase:str 2:conditions:[]PodCondition 3:message:str 4:reason:str 5:hostIP:str 6:podIP:str
    7:startTime:Time 8:containerStatuses:[]ContainerStatus 9:qosClass:str 10:initContainerStatuses:[]ContainerStatus
    11:nominatedNodeName:str 12:podIPs:[]PodIP 13:ephemeralContainerStatuses:[]ContainerStatus 14:resize:str
    15:resourceClaimStatuses:[]PodResourceClaimStatus 16:hostIPs:[]HostIP 17:observedGeneration:int
PodTemplateSpec 1:metadata:ObjectMeta 2:spec:PodSpec
PortStatus 1:port:int? 2:protocol:str 3:error:str?
PortworxVolumeSource 1:volumeID:str 2:fsType:str 3:readOnly:bool
PreferredSchedulingTerm 1:weight:int? 2:preference:NodeSelectorTerm
Probe 1:^:ProbeHandler 2:initialDelaySeconds:int 3:timeoutSeconds:int 4:periodSeconds:int 5:successThreshold:int
    6:failureThreshold:int 7:terminationGracePeriodSeconds:int?
ProbeHandler 1:exec:ExecAction 2:httpGet:HTTPGetAction 3:tcpSocket:TCPSocketAction 4:grpc:GRPCAction
ProjectedVolumeSource 1:sources:[]VolumeProjection 2:defaultMode:int?
QuobyteVolumeSource 1:registry:str 2:volume:str 3:readOnly:bool 4:user:str 5:group:str 6:tenant:str
RBDVolumeSource 1:monitors:[]str 2:image:str 3:fsType:str 4:pool:str 5:user:str 6:keyring:str
    7:secretRef:LocalObjectReference 8:readOnly:bool
ResourceClaim 1:name:str 2:request:str
ResourceFieldSelector 1:containerName:str 2:resource:str 3:divisor:Quantity
ResourceHealth 1:resourceID:str 2:health:str
ResourceQuota 1:metadata:ObjectMeta 2:spec:ResourceQuotaSpec 3:status:ResourceQuotaStatus
ResourceQuotaSpec 1:hard:{Quantity} 2:scopes:[]str 3:scopeSelector:ScopeSelector
ResourceQuotaStatus 1:hard:{Quantity} 2:used:{Quantity}
ResourceRequirements 1:limits:{Quantity} 2:requests:{Quantity} 3:claims:[]ResourceClaim
ResourceStatus 1:name:str 2:resources:[]ResourceHealth
SELinuxOptions 1:user:str 2:role:str 3:type:str 4:level:str
ScaleIOVolumeSource 1:gateway:str 2:system:str 3:secretRef:LocalObjectReference 4:sslEnabled:bool
    5:protectionDomain:str 6:storagePool:str 7:storageMode:str 8:volumeName:str 9:fsType:str 10:readOnly:bool
ScopeSelector 1:matchExpressions:[]ScopedResourceSelectorRequirement
ScopedResourceSelectorRequirement 1:scopeName:str 2:operator:str 3:values:[]str
SeccompProfile 1:type:str 2:localhostProfile:str?
Secret 1:metadata:ObjectMeta 2:data:{bytes} 3:type:str 4:stringData:{str} 5:immutable:bool?
SecretEnvSource 1:^:LocalObjectReference 2:optional:bool?
SecretKeySelector 1:^:LocalObjectReference 2:key:str 3:optional:bool?
SecretProjection 1:^:LocalObjectReference 2:items:[]KeyToPath 4:optional:bool?
SecretVolumeSource 1:secretName:str 2:items:[]KeyToPath 3:defaultMode:int? 4:optional:bool?
SecurityContext 1:capabilities:Capabilities 2:privileged:bool? 3:seLinuxOptions:SELinuxOptions 4:runAsUser:int?
    5:runAsNonRoot:bool? 6:readOnlyRootFilesystem:bool? 7:allowPrivilegeEscalation:bool? 8:runAsGroup:int?
    9:procMount:str? 10:windowsOptions:WindowsSecurityContextOptions 11:seccompProfile:SeccompProfile
    12:appArmorProfile:AppArmorProfile
Service 1:metadata:ObjectMeta 2:spec:ServiceSpec 3:status:ServiceStatus
ServiceAccount 1:metadata:ObjectMeta 2:secrets:[]ObjectReference 3:imagePullSecrets:[]LocalObjectReference
    4:automountServiceAccountToken:bool?
ServiceAccountTokenProjection 1:audience:str 2:expirationSeconds:int? 3:path:str
ServicePort 1:name:str 2:protocol:str 3:port:int? 4:targetPort:IntOrString 5:nodePort:int 6:appProtocol:str?
ServiceSpec 1:ports:[]ServicePort 2:selector:{str} 3:clusterIP:str 4:type:str 5:externalIPs:[]str
    7:sessionAffinity:str 8:loadBalancerIP:str 9:loadBalancerSourceRanges:[]str 10:externalName:str
    11:externalTrafficPolicy:str 12:healthCheckNodePort:int 13:publishNotReadyAddresses:bool
    14:sessionAffinityConfig:SessionAffinityConfig 17:ipFamilyPolicy:str? 18:clusterIPs:[]str 19:ipFamilies:[]str
    20:allocateLoadBalancerNodePorts:bool? 21:loadBalancerClass:str? 22:internalTrafficPolicy:str?
    23:trafficDistribution:str?
ServiceStatus 1:loadBalancer:LoadBalancerStatus 2:conditions:[]Condition
SessionAffinityConfig 1:clientIP:ClientIPConfig
SleepAction 1:seconds:int
StorageOSVolumeSource 1:volumeName:str 2:volumeNamespace:str 3:fsType:str 4:readOnly:bool
    5:secretRef:LocalObjectReference
Sysctl 1:name:str 2:value:str
TCPSocketAction 1:port:IntOrString 2:host:str
Toleration 1:key:str 2:operator:str 3:value:str 4:effect:str 5:tolerationSeconds:int?
TopologySpreadConstraint 1:maxSkew:int 2:topologyKey:str 3:whenUnsatisfiable:str 4:labelSelector:LabelSelector
    5:minDomains:int? 6:nodeAffinityPolicy:str? 7:nodeTaintsPolicy:str? 8:matchLabelKeys:[]str
TypedLocalObjectReference 1:apiGroup:str? 2:kind:str 3:name:str
TypedObjectReference 1:apiGroup:str? 2:kind:str 3:name:str 4:namespace:str?
Volume 1:name:str 2:^:VolumeSource
VolumeDevice 1:name:str 2:devicePath:str
VolumeMount 1:name:str 2:readOnly:bool 3:mountPath:str 4:subPath:str 5:mountPropagation:str? 6:subPathExpr:str
    7:recursiveReadOnly:str?
VolumeMountStatus 1:name:str 2:mountPath:str 3:readOnly:bool 4:recursiveReadOnly:str?
VolumeProjection 1:secret:SecretProjection 2:downwardAPI:DownwardAPIProjection 3:configMap:ConfigMapProjection
    4:serviceAccountToken:ServiceAccountTokenProjection 5:clusterTrustBundle:ClusterTrustBundleProjection
VolumeResourceRequirements 1:limits:{Quantity} 2:requests:{Quantity}
VolumeSource 1:hostPath:HostPathVolumeSource 2:emptyDir:EmptyDirVolumeSource
    3:gcePersistentDisk:GCEPersistentDiskVolumeSource 4:awsElasticBlockStore:AWSElasticBlockStoreVolumeSource
    5:gitRepo:GitRepoVolumeSource 6:secret:SecretVolumeSource 7:nfs:NFSVolumeSource 8:iscsi:ISCSIVolumeSource
    9:glusterfs:GlusterfsVolumeSource 10:persistentVolumeClaim:PersistentVolumeClaimVolumeSource
    11:rbd:RBDVolumeSource 12:flexVolume:FlexVolumeSource 13:cinder:CinderVolumeSource 14:cephfs:CephFSVolumeSource
    15:flocker:FlockerVolumeSource 16:downwardAPI:DownwardAPIVolumeSource 17:fc:FCVolumeSource
    18:azureFile:AzureFileVolumeSource 19:configMap:ConfigMapVolumeSource
    20:vsphereVolume:VsphereVirtualDiskVolumeSource 21:quobyte:QuobyteVolumeSource
    22:azureDisk:AzureDiskVolumeSource 23:photonPersistentDisk:PhotonPersistentDiskVolumeSource
    24:portworxVolume:PortworxVolumeSource 25:scaleIO:ScaleIOVolumeSource 26:projected:ProjectedVolumeSource
    27:storageos:StorageOSVolumeSource 28:csi:CSIVolumeSource 29:ephemeral:EphemeralVolumeSource
    30:image:ImageVolumeSource
VsphereVirtualDiskVolumeSource 1:volumePath:str 2:fsType:str 3:storagePolicyName:str 4:storagePolicyID:str
WeightedPodAffinityTerm 1:weight:int? 2:podAffinityTerm:PodAffinityTerm
WindowsSecurityContextOptions 1:gmsaCredentialSpecName:str? 2:gmsaCredentialSpec:str? 3:runAsUserName:str?
    4:hostProcess:bool?
[apps apps/v1] kinds: DaemonSet Deployment ReplicaSet StatefulSet
DaemonSet 1:metadata:ObjectMeta 2:spec:DaemonSetSpec 3:status:DaemonSetStatus
DaemonSetCondition 1:type:str 2:status:str 3:lastTransitionTime:Time 4:reason:str 5:message:str
DaemonSetSpec 1:selector:LabelSelector 2:template:PodTemplateSpec 3:updateStrategy:DaemonSetUpdateStrategy
    4:minReadySeconds:int 6:revisionHistoryLimit:int?
DaemonSetStatus 1:currentNumberScheduled:int? 2:numberMisscheduled:int? 3:desiredNumberScheduled:int?
    4:numberReady:int? 5:observedGeneration:int 6:updatedNumberScheduled:int 7:numberAvailable:int
    8:numberUnavailable:int 9:collisionCount:int? 10:conditions:[]DaemonSetCondition
DaemonSetUpdateStrategy 1:type:str 2:rollingUpdate:RollingUpdateDaemonSet
Deployment 1:metadata:ObjectMeta 2:spec:DeploymentSpec 3:status:DeploymentStatus
DeploymentCondition 1:type:str 2:status:str 4:reason:str 5:message:str 6:lastUpdateTime:Time
    7:lastTransitionTime:Time
DeploymentSpec 1:replicas:int? 2:selector:LabelSelector 3:template:PodTemplateSpec 4:strategy:DeploymentStrategy
    5:minReadySeconds:int 6:revisionHistoryLimit:int? 7:paused:bool 9:progressDeadlineSeconds:int?
DeploymentStatus 1:observedGeneration:int 2:replicas:int 3:updatedReplicas:int 4:availableReplicas:int
    5:unavailableReplicas:int 6:conditions:[]DeploymentCondition 7:readyReplicas:int 8:collisionCount:int?
    9:terminatingReplicas:int?
DeploymentStrategy 1:type:str 2:rollingUpdate:RollingUpdateDeployment
ReplicaSet 1:metadata:ObjectMeta 2:spec:ReplicaSetSpec 3:status:ReplicaSetStatus
ReplicaSetCondition 1:type:str 2:status:str 3:lastTransitionTime:Time 4:reason:str 5:message:str
ReplicaSetSpec 1:replicas:int? 2:selector:LabelSelector 3:template:PodTemplateSpec 4:minReadySeconds:int
ReplicaSetStatus 1:replicas:int? 2:fullyLabeledReplicas:int 3:observedGeneration:int 4:readyReplicas:int
    5:availableReplicas:int 6:conditions:[]ReplicaSetCondition 7:terminatingReplicas:int?
RollingUpdateDaemonSet 1:maxUnavailable:IntOrString 2:maxSurge:IntOrString
RollingUpdateDeployment 1:maxUnavailable:IntOrString 2:maxSurge:IntOrString
RollingUpdateStatefulSetStrategy 1:partition:int? 2:maxUnavailable:IntOrString
StatefulSet 1:metadata:ObjectMeta 2:spec:StatefulSetSpec 3:status:StatefulSetStatus
StatefulSetCondition 1:type:str 2:status:str 3:lastTransitionTime:Time 4:reason:str 5:message:str
StatefulSetOrdinals 1:start:int
StatefulSetPersistentVolumeClaimRetentionPolicy 1:whenDeleted:str 2:whenScaled:str
StatefulSetSpec 1:replicas:int? 2:selector:LabelSelector 3:template:PodTemplateSpec
    4:volumeClaimTemplates:[]PersistentVolumeClaim 5:serviceName:str 6:podManagementPolicy:str
    7:updateStrategy:StatefulSetUpdateStrategy 8:revisionHistoryLimit:int? 9:minReadySeconds:int
    10:persistentVolumeClaimRetentionPolicy:StatefulSetPersistentVolumeClaimRetentionPolicy
    11:ordinals:StatefulSetOrdinals
StatefulSetStatus 1:observedGeneration:int 2:replicas:int? 3:readyReplicas:int 4:currentReplicas:int
    5:updatedReplicas:int 6:currentRevision:str 7:updateRevision:str 9:collisionCount:int?
    10:conditions:[]StatefulSetCondition 11:availableReplicas:int
StatefulSetUpdateStrategy 1:type:str 2:rollingUpdate:RollingUpdateStatefulSetStrategy
[batch batch/v1] kinds: CronJob Job
CronJob 1:metadata:ObjectMeta 2:spec:CronJobSpec 3:status:CronJobStatus
CronJobSpec 1:schedule:str 2:startingDeadlineSeconds:int? 3:concurrencyPolicy:str 4:suspend:bool?
    5:jobTemplate:JobTemplateSpec 6:successfulJobsHistoryLimit:int? 7:failedJobsHistoryLimit:int? 8:timeZone:str?
CronJobStatus 1:active:[]ObjectReference 4:lastScheduleTime:Time 5:lastSuccessfulTime:Time
Job 1:metadata:ObjectMeta 2:spec:JobSpec 3:status:JobStatus
JobCondition 1:type:str 2:status:str 3:lastProbeTime:Time 4:lastTransitionTime:Time 5:reason:str 6:message:str
JobSpec 1:parallelism:int? 2:completions:int? 3:activeDeadlineSeconds:int? 4:selector:LabelSelector
    5:manualSelector:bool? 6:template:PodTemplateSpec 7:backoffLimit:int? 8:ttlSecondsAfterFinished:int?
    9:completionMode:str? 10:suspend:bool? 11:podFailurePolicy:PodFailurePolicy 12:backoffLimitPerIndex:int?
    13:maxFailedIndexes:int? 14:podReplacementPolicy:str? 15:managedBy:str? 16:successPolicy:SuccessPolicy
JobStatus 1:conditions:[]JobCondition 2:startTime:Time 3:completionTime:Time 4:active:int 5:succeeded:int
    6:failed:int 7:completedIndexes:str 8:uncountedTerminatedPods:UncountedTerminatedPods 9:ready:int?
    10:failedIndexes:str? 11:terminating:int?
JobTemplateSpec 1:metadata:ObjectMeta 2:spec:JobSpec
PodFailurePolicy 1:rules:[]PodFailurePolicyRule
PodFailurePolicyOnExitCodesRequirement 1:containerName:str? 2:operator:str 3:values:[]int
PodFailurePolicyOnPodConditionsPattern 1:type:str 2:status:str
PodFailurePolicyRule 1:action:str 2:onExitCodes:PodFailurePolicyOnExitCodesRequirement
    3:onPodConditions:[]PodFailurePolicyOnPodConditionsPattern
SuccessPolicy 1:rules:[]SuccessPolicyRule
SuccessPolicyRule 1:succeededIndexes:str? 2:succeededCount:int?
UncountedTerminatedPods 1:succeeded:[]str 2:failed:[]str
[policy policy/v1] kinds: PodDisruptionBudget
PodDisruptionBudget 1:metadata:ObjectMeta 2:spec:PodDisruptionBudgetSpec 3:status:PodDisruptionBudgetStatus
PodDisruptionBudgetSpec 1:minAvailable:IntOrString 2:selector:LabelSelector 3:maxUnavailable:IntOrString
    4:unhealthyPodEvictionPolicy:str?
PodDisruptionBudgetStatus 1:observedGeneration:int 2:disruptedPods:{Time} 3:disruptionsAllowed:int?
    4:currentHealthy:int? 5:desiredHealthy:int? 6:expectedPods:int? 7:conditions:[]Condition
[scheduling scheduling.k8s.io/v1] kinds: PriorityClass
PriorityClass 1:metadata:ObjectMeta 2:value:int? 3:globalDefault:bool 4:description:str 5:preemptionPolicy:str?
[rbac rbac.authorization.k8s.io/v1] kinds: ClusterRole ClusterRoleBinding Role RoleBinding
AggregationRule 1:clusterRoleSelectors:[]LabelSelector
ClusterRole 1:metadata:ObjectMeta 2:rules:[]PolicyRule 3:aggregationRule:AggregationRule
ClusterRoleBinding 1:metadata:ObjectMeta 2:subjects:[]Subject 3:roleRef:RoleRef
PolicyRule 1:verbs:[]str 2:apiGroups:[]str 3:resources:[]str 4:resourceNames:[]str 5:nonResourceURLs:[]str
Role 1:metadata:ObjectMeta 2:rules:[]PolicyRule
RoleBinding 1:metadata:ObjectMeta 2:subjects:[]Subject 3:roleRef:RoleRef
RoleRef 1:apiGroup:str 2:kind:str 3:name:str
Subject 1:kind:str 2:apiGroup:str 3:name:str 4:namespace:str
[networking networking.k8s.io/v1] kinds: Ingress
HTTPIngressPath 1:path:str 2:backend:IngressBackend 3:pathType:str?
HTTPIngressRuleValue 1:paths:[]HTTPIngressPath
Ingress 1:metadata:ObjectMeta 2:spec:IngressSpec 3:status:IngressStatus
IngressBackend 3:resource:TypedLocalObjectReference 4:service:IngressServiceBackend
IngressLoadBalancerIngress 1:ip:str 2:hostname:str 4:ports:[]IngressPortStatus
IngressLoadBalancerStatus 1:ingress:[]IngressLoadBalancerIngress
IngressPortStatus 1:port:int? 2:protocol:str 3:error:str?
IngressRule 1:host:str 2:^:IngressRuleValue
IngressRuleValue 1:http:HTTPIngressRuleValue
IngressServiceBackend 1:name:str 2:port:ServiceBackendPort
IngressSpec 1:defaultBackend:IngressBackend 2:tls:[]IngressTLS 3:rules:[]IngressRule 4:ingressClassName:str?
IngressStatus 1:loadBalancer:IngressLoadBalancerStatus
IngressTLS 1:hosts:[]str 2:secretName:str
ServiceBackendPort 1:name:str 2:number:int
[authentication authentication.k8s.io/v1] kinds: TokenRequest
BoundObjectReference 1:kind:str 2:apiVersion:str 3:name:str 4:uid:str
TokenRequest 1:metadata:ObjectMeta 2:spec:TokenRequestSpec 3:status:TokenRequestStatus
TokenRequestSpec 1:audiences:[]str 3:boundObjectRef:BoundObjectReference 4:expirationSeconds:int?
TokenRequestStatus 1:token:str 2:expirationTimestamp:Time
"""

_SCALARS = ("str", "int", "bool", "bytes")
_BUILTINS = ("Time", "Quantity", "IntOrString", "FieldsV1")


class _Field:
    __slots__ = ("number", "name", "type", "repeated", "is_map", "keep_zero", "inline", "message")

    def __init__(self, number: int, name: str, type_: str, repeated: bool, is_map: bool, keep_zero: bool):
        self.number, self.name, self.type = number, name, type_
        self.repeated, self.is_map, self.keep_zero = repeated, is_map, keep_zero
        self.inline = name == "^"
        self.message: _Message | None = None  # resolved for message-typed fields


class _Message:
    __slots__ = ("name", "fields")

    def __init__(self, name: str):
        self.name = name
        self.fields: dict[int, _Field] = {}


def _parse_schema(text: str) -> tuple[dict[str, _Message], dict[tuple[str, str], _Message]]:
    messages: dict[str, _Message] = {}
    kind_names: list[tuple[str, str, str]] = []  # (apiVersion, kind, message name)
    entries: list[tuple[str, list[str]]] = []
    section = ""
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("["):
            header, _sep, kinds = line[1:].partition("]")
            section, *api_version = header.split()
            kind_names += [(api_version[0], k, f"{section}.{k}") for k in kinds.replace("kinds:", "").split()]
        elif line.startswith(" "):
            entries[-1][1].extend(line.split())
        else:
            name, *tokens = line.split()
            entries.append((f"{section}.{name}", tokens))
    for full_name, tokens in entries:
        msg = messages[full_name] = _Message(full_name)
        for token in tokens:
            number, name, type_ = token.split(":")
            keep_zero = type_.endswith("?")
            type_ = type_.rstrip("?")
            repeated = type_.startswith("[]")
            is_map = type_.startswith("{")
            type_ = type_.removeprefix("[]").strip("{}")
            msg.fields[int(number)] = _Field(int(number), name, type_, repeated, is_map, keep_zero)
    for full_name, msg in messages.items():
        section = full_name.split(".")[0]
        for field in msg.fields.values():
            if field.type in _SCALARS or field.type in _BUILTINS:
                continue
            candidates = [field.type] if "." in field.type else [f"{s}.{field.type}" for s in (section, "core", "meta")]
            found = next((messages[c] for c in candidates if c in messages), None)
            if found is None:
                raise AssertionError(f"schema: {full_name} field {field.number} refers to unknown {field.type}")
            field.message = found
    kinds = {(api_version, kind): messages[name] for api_version, kind, name in kind_names}
    return messages, kinds


_MESSAGES, _KINDS = _parse_schema(_SCHEMA)
_UNKNOWN = _MESSAGES["runtime.Unknown"]
_OBJECT_META = _MESSAGES["meta.ObjectMeta"]


# --- wire format -----------------------------------------------------------------------------------------

def _varint(buf: bytes, pos: int, where: str) -> tuple[int, int]:
    result = shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise ValueError(f"{where}: truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ValueError(f"{where}: varint longer than 10 bytes")


def _wire_fields(buf: bytes, where: str):
    """Yield (field number, wire type, value): an int for varints, bytes for the other wire types."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos, where)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise ValueError(f"{where}: invalid field number 0")
        if wire_type == 0:
            value, pos = _varint(buf, pos, where)
        elif wire_type == 2:
            length, pos = _varint(buf, pos, where)
            if length > end - pos:
                raise ValueError(f"{where}: field {number} claims {length} bytes but only {end - pos} remain")
            value, pos = buf[pos:pos + length], pos + length
        elif wire_type in (1, 5):
            size = 8 if wire_type == 1 else 4
            if size > end - pos:
                raise ValueError(f"{where}: truncated fixed{size * 8} field {number}")
            value, pos = buf[pos:pos + size], pos + size
        else:
            raise ValueError(f"{where}: unsupported wire type {wire_type} for field {number}")
        yield number, wire_type, value


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


# --- values ----------------------------------------------------------------------------------------------

def _scalar(field: _Field, wire_type: int, value, where: str):
    if field.type in ("int", "bool"):
        if wire_type != 0:
            raise ValueError(f"{where}: expected a varint, got wire type {wire_type}")
        return value != 0 if field.type == "bool" else _signed(value)
    if wire_type != 2:
        raise ValueError(f"{where}: expected a length-delimited value, got wire type {wire_type}")
    if field.type == "str":
        return _text(value, where)
    return base64.b64encode(value).decode("ascii")  # bytes


def _text(raw, where: str) -> str:
    if not isinstance(raw, bytes):
        raise ValueError(f"{where}: expected a length-delimited string, got a varint")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: string is not valid UTF-8 ({exc.reason})") from None


def _builtin(type_: str, buf: bytes, where: str):
    parts = {number: value for number, _wire, value in _wire_fields(buf, where)}
    if type_ == "Quantity":  # {1: string}
        return _text(parts.get(1, b""), where) or "0"
    if type_ == "IntOrString":  # {1: type, 2: intVal, 3: strVal}
        kind = parts.get(1, 0)
        if kind == 0:
            value = parts.get(2, 0)
            if not isinstance(value, int):
                raise ValueError(f"{where}: IntOrString intVal has the wrong wire type")
            return _signed(value)
        if kind == 1:
            return _text(parts.get(3, b""), where)
        raise ValueError(f"{where}: IntOrString has unknown type {kind}")
    if type_ == "Time":  # {1: seconds, 2: nanos}; JSON keeps whole seconds
        seconds = parts.get(1, 0)
        if not isinstance(seconds, int) or not isinstance(parts.get(2, 0), int):
            raise ValueError(f"{where}: Time fields have the wrong wire type")
        seconds = _signed(seconds)
        if seconds == 0 and parts.get(2, 0) == 0:
            return None  # the zero time; JSON writes null
        try:
            t = datetime.fromtimestamp(seconds, timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise ValueError(f"{where}: Time seconds {seconds} out of range") from None
        return f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}Z"
    if type_ == "FieldsV1":  # {1: raw JSON}
        raw = parts.get(1, b"")
        try:
            return json.loads(raw) if raw else {}
        except (TypeError, ValueError):
            raise ValueError(f"{where}: FieldsV1 does not hold JSON") from None
    raise AssertionError(type_)


def _value(field: _Field, wire_type: int, value, where: str):
    if field.message is None and field.type not in _BUILTINS:
        return _scalar(field, wire_type, value, where)
    if wire_type != 2:
        raise ValueError(f"{where}: expected a message, got wire type {wire_type}")
    if field.message is None:
        return _builtin(field.type, value, where)
    return _decode_message(value, field.message, where)


_ZERO = {"str": "", "bytes": "", "int": 0, "bool": False, "Quantity": "0", "IntOrString": 0, "Time": None}


def _map_entry(field: _Field, buf: bytes, where: str):
    key, value = "", _ZERO.get(field.type, {})  # an absent key or value is the zero value
    for number, wire_type, raw in _wire_fields(buf, where):
        if number == 1:
            key = _text(raw, f"{where} key")
        elif number == 2:
            value = _value(field, wire_type, raw, f"{where}[{key!r}]")
    return key, value


def _decode_message(buf: bytes, msg: _Message, where: str) -> dict:
    out: dict = {}
    for number, wire_type, value in _wire_fields(buf, where):
        field = msg.fields.get(number)
        if field is None:
            continue  # a field this schema does not know (e.g. from a newer Kubernetes): skip it
        path = where if field.inline else f"{where}.{field.name}"
        if field.is_map:
            if wire_type != 2:
                raise ValueError(f"{path}: map entry has wire type {wire_type}")
            key, item = _map_entry(field, value, path)
            out.setdefault(field.name, {})[key] = item
        elif field.repeated:
            items = out.setdefault(field.name, [])
            if wire_type == 2 and field.type in ("int", "bool"):  # packed encoding
                pos = 0
                while pos < len(value):
                    item, pos = _varint(value, pos, path)
                    items.append(item != 0 if field.type == "bool" else _signed(item))
            else:
                items.append(_value(field, wire_type, value, f"{path}[{len(items)}]"))
        elif field.inline:
            out.update(_value(field, wire_type, value, path))
        else:
            item = _value(field, wire_type, value, path)
            if item is None or (not isinstance(item, dict) and not item and not field.keep_zero):
                out.pop(field.name, None)
            elif isinstance(item, dict) and isinstance(out.get(field.name), dict):
                out[field.name].update(item)  # a repeated occurrence of a message field merges into it
            else:
                out[field.name] = item
    return out


# --- public API ------------------------------------------------------------------------------------------

def decode_object(body: bytes) -> dict:
    """Decode a Kubernetes protobuf body (``k8s\\x00`` + runtime.Unknown) into the JSON-shaped object.

    Returns a dict with ``apiVersion``, ``kind``, ``metadata`` and the kind's other fields (``spec``,
    ``data``, ...) as the JSON API would carry them. For a kind this module has no schema for, only
    apiVersion, kind and metadata are returned. Raises ValueError if the body cannot be decoded.
    """
    if not isinstance(body, (bytes, bytearray, memoryview)):
        raise TypeError(f"decode_object() needs bytes, not {type(body).__name__}")
    body = bytes(body)
    if not body.startswith(MAGIC):
        raise ValueError("not a Kubernetes protobuf body: it does not start with the 4-byte magic 'k8s\\x00'")
    unknown = _decode_message(body[len(MAGIC):], _UNKNOWN, "runtime.Unknown")
    type_meta = unknown.get("typeMeta", {})
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    if not api_version or not kind:
        raise ValueError("Kubernetes protobuf body has no apiVersion/kind in its runtime.Unknown typeMeta")
    encoding = unknown.get("contentEncoding", "")
    if encoding:
        raise ValueError(f"unsupported contentEncoding {encoding!r} in Kubernetes protobuf body")
    content_type = unknown.get("contentType", "")
    if content_type not in ("", PROTOBUF_CONTENT_TYPE):
        raise ValueError(f"unsupported contentType {content_type!r} in Kubernetes protobuf body")
    raw = base64.b64decode(unknown.get("raw", ""))
    msg = _KINDS.get((api_version, kind))
    where = f"{api_version} {kind}"
    if msg is None:  # unknown kind: field 1 is ObjectMeta in every Kubernetes object; nothing else is decoded
        obj = {}
        for number, wire_type, value in _wire_fields(raw, where):
            if number == 1:
                if wire_type != 2:
                    raise ValueError(f"{where}: metadata has wire type {wire_type}")
                obj["metadata"] = _decode_message(value, _OBJECT_META, f"{where}.metadata")
    else:
        obj = _decode_message(raw, msg, where)
    return {"apiVersion": api_version, "kind": kind, **obj}
