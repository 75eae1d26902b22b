"""`kubevirt_ops.rebalance.vm_migration_wait` against the simulator: it returns when a slow migration succeeds, a
hanging one fails the module at the timeout with its name and phase, a cancelled or failed one is final (and fails
the module only with fail_on_failed), and an idle wait costs one list and no polling."""
from __future__ import annotations

import threading
import time

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.vm_migration_wait import (
    ARG_SPEC,
    MigrationsUnfinished,
    VmMigrationWaitOptions,
    run,
)

from support.waiting import wait_for

from .test_kubevirt_eviction_facts import simulator  # noqa: F401  # pylint: disable=unused-import  # the fixture, shared
from .test_vm_migration_verify import run_module

pytestmark = pytest.mark.simulator

NAMESPACE = "desched-test"
MODULE = "kubevirt_ops.rebalance.vm_migration_wait"


def start_migration(sim, vmi: str, fault: str | None = None) -> str:
    """Annotate a simulator fault on the VMI (if any) and create a migration of it, as `virtctl migrate` does."""
    if fault:
        sim.kubectl("annotate", "vmi", vmi, "-n", NAMESPACE, "--overwrite", "kubesim.io/migration=" + fault)
    manifest = ("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstanceMigration\n"
                "metadata: {{generateName: {0}-migration-, namespace: {1}}}\nspec: {{vmiName: {0}}}\n").format(vmi, NAMESPACE)
    return sim.kubectl("create", "-f", "-", "-o", "name", input=manifest).stdout.strip().split("/", 1)[1]


def phase_of(sim, name: str) -> str | None:
    return (sim.kubectl_json("get", "vmim", name, "-n", NAMESPACE).get("status") or {}).get("phase")


def wait(sim, **given) -> dict:
    """The wait in this process, as the module runs it: api_timeout and timeout 60 s unless given."""
    given = dict({"api_timeout": 60, "timeout": 60}, **given)
    return run(VmMigrationWaitOptions.from_params(spec_params(ARG_SPEC, kubeconfig=sim.kubeconfig, **given)), False)


def test_returns_when_a_slow_migration_succeeds(simulator):
    sim = simulator("rebalance-two-workers")
    name = start_migration(sim, "vm-1", "slow")
    # in-process, so the wait starts at once (an ansible run may start after the ~4.5 s migration is over)
    result = wait(sim, namespaces=[NAMESPACE])
    assert result["changed"] is False and result["unfinished"] == 0 and result["failed_migrations"] == []
    entry = next(m for m in result["migrations"] if m["name"] == name)
    assert (entry["vmi"], entry["phase"], entry["source"], entry["target"]) == ("vm-1", "Succeeded", "worker-a", "worker-b")
    assert entry["evacuation"] is False and entry["finished"]
    assert result["waited_seconds"] > 1  # a slow migration takes about 4.5 s here: the module did wait
    assert phase_of(sim, name) == "Succeeded"
    assert sim.kubectl_json("get", "vmi", "vm-1", "-n", NAMESPACE)["status"]["nodeName"] == "worker-b"


def test_a_hanging_migration_fails_at_the_timeout_naming_it_and_its_phase(simulator):
    sim = simulator("rebalance-two-workers")
    name = start_migration(sim, "vm-2", "hang")
    result = run_module(sim, module=MODULE, expect_failure=True, namespaces=[NAMESPACE], vmi_names=["vm-2"], timeout=3)
    assert "1 of 1 migrations still unfinished after 3s" in result["msg"]
    assert "{0}/{1} (".format(NAMESPACE, name) in result["msg"] and "VMI vm-2" in result["msg"]
    assert result["unfinished"] == 1 and result["migrations"][0]["phase"] not in ("Succeeded", "Failed")
    assert 3 <= result["waited_seconds"] < 5
    assert phase_of(sim, name) == "Running"


def test_a_cancelled_migration_is_final_and_fails_only_with_fail_on_failed(simulator):
    sim = simulator("rebalance-two-workers")
    name = start_migration(sim, "vm-2", "hang")
    wait_for(lambda: phase_of(sim, name) == "Running", timeout=20, what=f"migration {name} Running")
    sim.reset_counters()
    done = {}

    def run():
        done["result"] = wait(sim, namespaces=[NAMESPACE], vmi_names=[NAMESPACE + "/vm-2"])
    waiter = threading.Thread(target=run)
    waiter.start()
    sim.wait_for_watches({"virtualmachineinstancemigrations": 1})  # the cancel below is an event the wait sees, not a list
    assert "result" not in done  # still waiting on the hanging migration
    cancelled_at = time.monotonic()
    sim.kubectl("delete", "vmim", name, "-n", NAMESPACE, "--wait=false")
    waiter.join(30)
    assert time.monotonic() - cancelled_at < 3
    result = done["result"]
    assert result["unfinished"] == 0
    assert [f["name"] for f in result["failed_migrations"]] == [name] or result["deleted_while_waiting"] == ["{0}/{1}".format(NAMESPACE, name)]


def test_a_failed_migration_is_final_and_fails_the_module_only_with_fail_on_failed(simulator):
    sim = simulator("rebalance-two-workers")
    name = start_migration(sim, "vm-1", "fail")
    result = wait(sim, namespaces=[NAMESPACE])
    assert result["unfinished"] == 0 and [f["name"] for f in result["failed_migrations"]] == [name]
    assert "simulated failure" in result["failed_migrations"][0]["failure_reason"]
    failed = run_module(sim, module=MODULE, expect_failure=True, namespaces=[NAMESPACE], fail_on_failed=True, timeout=10)
    assert "1 migrations ended Failed" in failed["msg"] and name in failed["msg"] and "simulated failure" in failed["msg"]
    assert phase_of(sim, name) == "Failed"


def test_an_idle_wait_costs_one_list_and_no_polling(simulator):
    sim = simulator("rebalance-two-workers")
    name = start_migration(sim, "vm-1", "hang")
    sim.reset_counters()
    started = time.monotonic()
    try:
        wait(sim, timeout=2)
        raise AssertionError("the wait should time out")
    except MigrationsUnfinished as error:
        assert name in error.message
    assert time.monotonic() - started < 4
    requests = sim.counters()
    assert requests.get("list virtualmachineinstancemigrations") == 1
    assert requests.get("watch virtualmachineinstancemigrations", 0) <= 2
