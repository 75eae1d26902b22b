"""The rehearsal's objects: the labelled namespace (and only it counts as the rehearsal's), test VMs scoped by label
with a preferred affinity to worker A and a required one to A and B, PVC data disks when a class is given, and a
launcher estimate that errs on the large side of KubeVirt's overhead."""
from __future__ import annotations

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import rehearsal_objects as objects

LABELS = {"app": "kubevirt-ops-rehearsal"}


def test_only_a_namespace_with_both_labels_is_the_rehearsals():
    namespace = objects.namespace_object("kubevirt-ops-rehearsal", "20261201T000000Z")
    assert objects.is_rehearsal_namespace(namespace)
    assert namespace["metadata"]["annotations"] == {"kubevirt-ops.io/rehearsal-run": "20261201T000000Z"}
    del namespace["metadata"]["labels"]["kubevirt-ops.io/rehearsal"]
    assert not objects.is_rehearsal_namespace(namespace)
    assert not objects.is_rehearsal_namespace(None)


def test_a_test_vm_live_migrates_is_scoped_and_prefers_worker_a():
    vm = objects.vm_object("rehearsal-vm-1", "ns", 2816 * objects.MI, LABELS, "worker-a", "worker-b", "image:1")
    template = vm["spec"]["template"]
    assert vm["spec"]["runStrategy"] == "Always" and template["spec"]["evictionStrategy"] == "LiveMigrate"
    assert template["metadata"]["labels"] == {"app": "kubevirt-ops-rehearsal", "kubevirt.io/vm": "rehearsal-vm-1"}
    assert template["spec"]["domain"]["resources"]["requests"] == {"memory": "2816Mi"}
    affinity = template["spec"]["affinity"]["nodeAffinity"]
    required = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert required == {"key": "kubernetes.io/hostname", "operator": "In", "values": ["worker-a", "worker-b"]}
    preferred = affinity["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert preferred["weight"] == 100 and preferred["preference"]["matchExpressions"][0]["values"] == ["worker-a"]
    assert template["spec"]["volumes"] == [{"name": "rootdisk", "containerDisk": {"image": "image:1"}}]


def test_a_storage_class_adds_an_rwx_data_disk_per_vm():
    vm = objects.vm_object("rehearsal-vm-1", "ns", objects.GI, LABELS, "a", "b", "image:1", storage_class="ceph-rbd")
    assert vm["spec"]["template"]["spec"]["volumes"][1] == {"name": "datadisk", "persistentVolumeClaim": {"claimName": "rehearsal-vm-1-data"}}
    claim = objects.pvc_object("rehearsal-vm-1", "ns", "ceph-rbd", "1Gi", "Block", LABELS)
    assert claim["spec"] == {"accessModes": ["ReadWriteMany"], "storageClassName": "ceph-rbd", "resources": {"requests": {"storage": "1Gi"}},
                             "volumeMode": "Block"}


def test_the_launcher_estimate_is_at_least_the_pages_overhead_and_quantities_are_exact():
    assert objects.launcher_memory(512 * objects.MI) - 512 * objects.MI >= 270 * objects.MI   # "about 270Mi for a 512Mi guest"
    assert objects.memory_quantity(3 * objects.GI) == "3Gi" and objects.memory_quantity(2816 * objects.MI) == "2816Mi"
    assert objects.memory_quantity(1000) == "1000"
    assert objects.vm_names(2) == ["rehearsal-vm-1", "rehearsal-vm-2"]
