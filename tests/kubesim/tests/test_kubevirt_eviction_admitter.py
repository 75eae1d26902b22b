"""KubeVirt's pod eviction admitter where its own API calls fail, and for hotplug attachment Pods (issue 14):
a VMI it cannot read is 429 `kubevirt failed getting the vmi: <error>`, a mark it cannot write is 429 `kubevirt
failed marking the vmi for eviction: <error>` and marks nothing, a dry run sends the mark as a dry-run patch
(so only `dryRun: true` rules reach it), a Pod it cannot read is let through, and a hotplug Pod of a running
VMI is refused. The failures are injected by fault rules scoped to `component: virt-api` (faults.py)."""
import pytest

from kubesim.api import RequestContext
from kubesim.errors import ApiError
from kubesim.faults import Faults
from kubesim.kubevirt import objects
from kubesim.subresources import evict

from kubevirt_sim import NS, VMI, Sim

PREFIX = 'admission webhook "virt-launcher-eviction-interceptor.kubevirt.io" denied the request: '
DESCHEDULER = {"requested-by": "sigs.k8s.io/descheduler"}
INJECTED_500 = "Internal error occurred: injected by kubesim"
TRIGGERED = PREFIX + 'Eviction triggered evacuation of VMI "vms/lm"'


@pytest.fixture(scope="module")
def sim():
    sim = Sim([objects.vm("lm", NS, eviction_strategy="LiveMigrate", annotations={"kubesim.io/migration": "hang"})],
              strategy=None)
    sim.wait_running("lm")
    sim.settle()
    sim.faults = Faults()
    sim.faults.attach(sim.cluster)
    yield sim
    sim.stop()


@pytest.fixture
def faults(sim):
    yield sim.faults
    sim.faults.remove()
    sim.faults.reset_counters()


def virt_api(verb: str, resource: str = "virtualmachineinstances", **extra) -> dict:
    return {"component": "virt-api", "verb": verb, "resource": resource, **extra}


def launcher_name(sim) -> str:
    return sim.launcher("lm")["metadata"]["name"]


def assert_untouched(sim) -> None:
    vmi = sim.get(VMI, "lm")
    assert "evacuationNodeName" not in vmi["status"]
    assert "kubevirt.io/eviction-source" not in (vmi["metadata"].get("annotations") or {})
    assert sim.get("pods", launcher_name(sim))["metadata"].get("deletionTimestamp") is None
    sim.settle()
    assert sim.migrations("lm") == []


# ------------------------------------------------------------------------------------------ VMI read
@pytest.mark.parametrize("status, error", [
    (500, INJECTED_500),
    (429, "the server has received too many requests and has asked us to try again later"),
    (404, "injected fault {id}"),     # a launcher's VMI not found is refused too, unlike a hotplug Pod's
])
def test_vmi_read_failure_is_429_failed_getting_the_vmi(sim, faults, status, error):
    rule = faults.add(virt_api("get", name="lm", status=status))
    err = sim.evict(launcher_name(sim), annotations=DESCHEDULER)
    assert (err.code, err.reason) == (429, "TooManyRequests")
    assert err.message == PREFIX + "kubevirt failed getting the vmi: " + error.format(id=rule.id)
    assert_untouched(sim)


# ------------------------------------------------------------------------------------------ mark
def test_mark_failure_is_429_failed_marking_and_marks_nothing(sim, faults):
    conflict = ('Operation cannot be fulfilled on virtualmachineinstances.kubevirt.io "lm": the object has been '
                "modified; please apply your changes to the latest version and try again")
    faults.add(virt_api("patch", status=409, message=conflict, count=1))
    err = sim.evict(launcher_name(sim), annotations=DESCHEDULER)
    assert (err.code, err.reason) == (429, "TooManyRequests")
    assert err.message == PREFIX + "kubevirt failed marking the vmi for eviction: " + conflict
    assert "Eviction triggered evacuation" not in err.message and "Evacuation in progress" not in err.message
    assert_untouched(sim)
    assert sim.faults.counter_report("workload")["workload"]["faulted"] == {"virt-api patch virtualmachineinstances": 1}
    # the rule is spent: the caller's retry is answered as upstream's (a dry run here, to keep the VMI unmarked)
    assert sim.evict(launcher_name(sim), dry_run=True).message == TRIGGERED


@pytest.mark.parametrize("where", ["query", "deleteOptions"])
def test_dry_run_mark_is_a_dry_run_patch(sim, faults, where):
    real_only = faults.add(virt_api("patch", dryRun=False, status=500))
    err = dry_evict(sim, where)
    assert err.message == TRIGGERED
    assert [r["fired"] for r in faults.rules() if r["id"] == real_only.id] == [0]
    faults.add(virt_api("patch", dryRun=True, status=500))
    err = dry_evict(sim, where)
    assert err.message == PREFIX + "kubevirt failed marking the vmi for eviction: " + INJECTED_500
    assert_untouched(sim)


def dry_evict(sim, where: str):
    """A dry-run Eviction, dry by the request's `dryRun=All` or by the body's `deleteOptions.dryRun`."""
    name = launcher_name(sim)
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NS}}
    if where == "deleteOptions":
        body["deleteOptions"] = {"dryRun": ["All"]}
    try:
        return evict(sim.cluster, NS, name, body, RequestContext(dry_run=where == "query"))
    except ApiError as err:
        return err


# ------------------------------------------------------------------------------------------ scoping
def test_http_rules_do_not_reach_the_webhook(sim, faults):
    for verb in ("get", "patch"):
        faults.add({"verb": verb, "resource": "virtualmachineinstances", "status": 500})
    assert sim.evict(launcher_name(sim), dry_run=True).message == TRIGGERED
    assert [r["fired"] for r in faults.rules()] == [0, 0]


def test_evicted_pod_read_failure_passes_the_eviction(sim, faults):
    faults.add(virt_api("get", resource="pods", name=launcher_name(sim), status=500))
    assert sim.evict(launcher_name(sim), dry_run=True) is None     # 201: the webhook let it through
    assert_untouched(sim)


def test_component_rules_are_validated():
    faults = Faults()
    with pytest.raises(ValueError, match=r"unknown component 'virt-controller'; known: \['virt-api', 'virt-handler'\]"):
        faults.add(virt_api("get", component="virt-controller", status=500))
    for action in ({"latency": 1}, {"drop": True}, {"warning": "w"}, {"status": 500, "latency": 1}):
        with pytest.raises(ValueError, match="a component fault answers an error status only"):
            faults.add(virt_api("get", **action))
    assert faults.add(virt_api("get", status=500)).as_dict() == {
        "id": 1, "fired": 0, "verb": "get", "resource": "virtualmachineinstances", "component": "virt-api",
        "status": 500}


# ------------------------------------------------------------------------------------------ hotplug
@pytest.fixture
def hotplug(sim):
    launcher = sim.launcher("lm")
    owner = {"apiVersion": "v1", "kind": "Pod", "name": launcher["metadata"]["name"],
             "uid": launcher["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    created = []

    def make(name: str, owners: list | None = None, labels: dict | None = None) -> str:
        sim.create({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": NS,
                                 "labels": labels or {"kubevirt.io": "hotplug-disk"},
                                 "ownerReferences": [owner] if owners is None else owners},
                    "spec": {"nodeName": launcher["spec"]["nodeName"],
                             "containers": [{"name": "hotplug-disk", "image": "virt-launcher"}]}})
        created.append(name)
        return name
    yield make
    for name in created:
        if sim.get("pods", name) is not None:
            sim.delete("pods", name)


def test_hotplug_pod_of_a_running_vmi_is_refused(sim, hotplug):
    name = hotplug("hp-volume-abcde")
    err = sim.evict(name)
    assert (err.code, err.reason) == (429, "TooManyRequests")
    assert err.message == PREFIX + f"cannot evict hotplug pod: {name} associated with running vmi: lm in namespace {NS}"
    assert sim.get("pods", name)["metadata"].get("deletionTimestamp") is None
    assert sim.evict(name, dry_run=True).message == err.message
    assert_untouched(sim)


def test_hotplug_pod_read_failures(sim, hotplug, faults):
    name = hotplug("hp-volume-fghij")
    owner = launcher_name(sim)
    faults.add(virt_api("get", resource="pods", name=owner, status=500, count=1))
    assert sim.evict(name, dry_run=True).message == PREFIX + "failed getting owner for hotplug pod: " + INJECTED_500
    faults.add(virt_api("get", name="lm", status=503, count=1))
    assert sim.evict(name, dry_run=True).message == (PREFIX + "kubevirt failed getting the vmi: the server is "
                                                     "currently unable to handle the request")
    # not found, the owner or the VMI: nothing to protect, the eviction goes on (201)
    faults.add(virt_api("get", resource="pods", name=owner, status=404, count=1))
    assert sim.evict(name, dry_run=True) is None
    faults.add(virt_api("get", name="lm", status=404, count=1))
    assert sim.evict(name, dry_run=True) is None
    assert faults.rules() == []


def test_pods_that_are_not_hotplug_pods_of_a_launcher_pass(sim, hotplug):
    launcher = sim.launcher("lm")
    two = hotplug("hp-two-owners", owners=[
        {"apiVersion": "v1", "kind": "Pod", "name": launcher["metadata"]["name"], "uid": launcher["metadata"]["uid"]},
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": "0000"}])
    assert sim.evict(two, dry_run=True) is None
    plain = hotplug("plain-owner")                                   # the owner is not a virt-launcher Pod
    sim.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "not-a-launcher", "namespace": NS},
                "spec": {"nodeName": launcher["spec"]["nodeName"], "containers": [{"name": "c", "image": "i"}]}})
    pod = sim.get("pods", "not-a-launcher")
    sim.patch("pods", plain, {"metadata": {"ownerReferences": [
        {"apiVersion": "v1", "kind": "Pod", "name": "not-a-launcher", "uid": pod["metadata"]["uid"]}]}})
    assert sim.evict(plain, dry_run=True) is None
    sim.delete("pods", "not-a-launcher")
    labelled = hotplug("hp-other-label", labels={"kubevirt.io": "something-else"})
    assert sim.evict(labelled, dry_run=True) is None
