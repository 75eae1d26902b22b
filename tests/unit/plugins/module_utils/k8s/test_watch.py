"""list + watch with resourceVersion, reconnects, 410 Gone relists and the deadline, with a scripted watch."""
from __future__ import annotations

import threading
import time

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.watch import Stream, WatchSet


def obj(name, rv, **extra):
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)}, **extra}


class Lister:
    """A connection stand-in: `list` answers the next scripted list and sets `last_resource_version`."""

    def __init__(self, lists):
        self.lists = list(lists)
        self.last_resource_version = None
        self.calls = 0

    def list(self, resource, namespace=None, label_selector=None):
        self.calls += 1
        items, version = self.lists.pop(0) if len(self.lists) > 1 else self.lists[0]
        self.last_resource_version = version
        return items


class Script:
    """Watch calls answer scripted iterables in order; the last one blocks until released."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.versions = []
        self.release = threading.Event()

    def __call__(self, resource, namespace=None, label_selector=None, resource_version=None, timeout=None):
        self.versions.append(resource_version)
        answer = self.answers.pop(0) if self.answers else None
        if answer is None:
            self.release.wait(timeout=min(timeout, 5))
            return
        for item in answer:
            if isinstance(item, Exception):
                raise item
            yield item


def watchset(lister, script, seconds=5.0, **kwargs):
    return WatchSet(lister, [Stream("vmis", object(), "ns")], time.monotonic() + seconds, watch=script, **kwargs)


def test_events_after_the_list_and_resource_version():
    script = Script([{"type": "MODIFIED", "object": obj("a", 11, phase="done")}])
    ws = watchset(Lister([([obj("a", 10)], "10")]), script)
    ws.start()
    assert ws.wait(lambda w: (w.cache["vmis"][("ns", "a")].get("phase") == "done"))
    assert script.versions[0] == "10"
    ws.stop()
    script.release.set()


def test_a_closed_watch_is_reopened_from_the_last_version_and_bookmarks_count():
    script = Script([{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}}],
                    [{"type": "ADDED", "object": obj("b", 16)}])
    ws = watchset(Lister([([], "10")]), script)
    ws.start()
    assert ws.wait(lambda w: ("ns", "b") in w.cache["vmis"])
    assert script.versions[:2] == ["10", "15"]
    ws.stop()
    script.release.set()


def test_410_gone_lists_again_and_watches_from_the_new_list():
    script = Script([{"type": "ERROR", "object": {"code": 410, "reason": "Expired", "message": "too old resource version"}}],
                    [{"type": "DELETED", "object": obj("a", 31)}])
    lister = Lister([([obj("a", 10)], "10"), ([obj("a", 20), obj("c", 21)], "30")])
    ws = watchset(lister, script)
    ws.start()
    assert ws.wait(lambda w: set(w.cache["vmis"]) == {("ns", "c")})
    assert script.versions[:2] == ["10", "30"] and lister.calls == 2
    assert ws.stats["relists_after_410"] == 1
    ws.stop()
    script.release.set()


def test_errors_reconnect_after_a_backoff():
    script = Script([ApiFailure("watch vmis", 0, "ConnectionError", "reset")], [{"type": "ADDED", "object": obj("d", 12)}])
    ws = watchset(Lister([([], "10")]), script)
    ws.start()
    assert ws.wait(lambda w: ("ns", "d") in w.cache["vmis"])
    assert ws.stats["reconnects"] == 1 and "reset" in ws.errors[0]
    ws.stop()
    script.release.set()


def test_the_deadline_ends_the_wait_without_polling():
    script = Script()
    ws = watchset(Lister([([obj("a", 10)], "10")]), script, seconds=0.5)
    asked = []
    ws.start()
    started = time.monotonic()
    assert ws.wait(lambda w: asked.append(1) and False) is False
    assert 0.4 < time.monotonic() - started < 1.5
    assert len(asked) <= 2 and len(script.versions) == 1
    script.release.set()


def test_wake_every_asks_again_without_events_for_a_caller_that_retries_on_a_timer():
    script = Script()
    ws = watchset(Lister([([obj("a", 10)], "10")]), script, seconds=5.0)
    asked = []
    ws.start()
    started = time.monotonic()
    assert ws.wait(lambda w: len(asked) >= 3 or asked.append(1), wake_every=0.1) is True
    assert time.monotonic() - started < 1.5 and len(script.versions) == 1   # asked again, no new watch request
    script.release.set()
    ws.stop()


def test_observer_sees_listed_and_watched_objects():
    seen = []
    script = Script([{"type": "MODIFIED", "object": obj("a", 11, note="x")}])
    ws = watchset(Lister([([obj("a", 10)], "10")]), script, observe=lambda stream, kind, item: seen.append((kind, item.get("note"))))
    ws.start()
    ws.wait(lambda w: w.cache["vmis"][("ns", "a")].get("note") == "x")
    assert seen == [("ADDED", None), ("MODIFIED", "x")]
    ws.stop()
    script.release.set()


def test_a_refused_watch_ends_the_wait_with_the_api_answer_instead_of_reconnecting():
    denied = ApiFailure("watch vmis", 403, "Forbidden",
                        'virtualmachineinstances.kubevirt.io is forbidden: User "u" cannot watch resource "virtualmachineinstances" '
                        'in API group "kubevirt.io" in the namespace "ns"')
    script = Script([denied], [{"type": "MODIFIED", "object": obj("a", 11)}])
    ws = watchset(Lister([([obj("a", 10)], "10")]), script)
    ws.start()
    started = time.monotonic()
    try:
        ws.wait(lambda w: False)
    except ApiFailure as error:
        assert error.status == 403 and 'cannot watch resource "virtualmachineinstances"' in error.message
    else:
        raise AssertionError("the wait did not raise")
    assert time.monotonic() - started < 1 and len(script.versions) == 1
