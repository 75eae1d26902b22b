"""ConfigMap validation as the API server's ValidateConfigMap does it, on real and dry-run writes alike: the
name is a DNS subdomain, keys are config keys, data + binaryData hold at most 1 MiB, an immutable ConfigMap
keeps its data; refusals are 422 Invalid Status objects with the upstream message and details.causes, and
leave the store as it was."""
import base64

import pytest

from kubesim.api import Cluster, RequestContext
from kubesim.clock import Clock
from kubesim.errors import ApiError
from kubesim.resources import DEFAULT_BUNDLES, Registry, resolve_bundles
from kubesim.scenario import populate

LIMIT = 1048576
NAME_MESSAGE = ('ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 '
                "subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end "
                "with an alphanumeric character (e.g. 'example.com', regex used for validation is "
                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
SIZE_BODY = "Too long: may not be more than 1048576 bytes"


@pytest.fixture
def cluster():
    c = Cluster("workload", Registry(resolve_bundles(DEFAULT_BUNDLES["workload"])), Clock(100))
    populate(c, {"namespaces": ["ops"]})
    return c


def cms(cluster):
    return cluster.registry.by_key("configmaps")


def cm(name, data=None, binary=None, **extra):
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, **extra}
    if data is not None:
        obj["data"] = data
    if binary is not None:
        obj["binaryData"] = binary
    return obj


def refused(call) -> ApiError:
    with pytest.raises(ApiError) as err:
        call()
    assert err.value.code == 422 and err.value.reason == "Invalid"
    return err.value


def stored(cluster):
    return cluster.store.rv, [e.obj for e in cluster.store.entries("configmaps", "ops")]


@pytest.mark.parametrize("dry_run", [False, True], ids=["real", "dry-run"])
def test_invalid_name_is_refused_with_the_apiserver_message(cluster, dry_run):
    before = stored(cluster)
    err = refused(lambda: cluster.create(cms(cluster), "ops", cm("Bad_Name", {"k": "v"}),
                                         RequestContext(dry_run=dry_run)))
    assert err.message == NAME_MESSAGE
    assert err.details == {"name": "Bad_Name", "kind": "ConfigMap", "causes": [{
        "reason": "FieldValueInvalid", "field": "metadata.name",
        "message": NAME_MESSAGE.split("metadata.name: ", 1)[1]}]}
    assert stored(cluster) == before


def test_too_long_name_says_so_and_generate_name_is_checked(cluster):
    long_name = "a" * 254
    err = refused(lambda: cluster.create(cms(cluster), "ops", cm(long_name)))
    assert err.message == (f'ConfigMap "{long_name}" is invalid: metadata.name: Invalid value: "{long_name}": '
                           "must be no more than 253 characters")
    err = refused(lambda: cluster.create(cms(cluster), "ops", {"apiVersion": "v1", "kind": "ConfigMap",
                                                               "metadata": {"generateName": "Plan-"}}))
    assert [c["field"] for c in err.details["causes"]] == ["metadata.generateName", "metadata.name"]
    assert err.message.startswith('ConfigMap "Plan-') and 'metadata.generateName: Invalid value: "Plan-": a lowercase' \
        in err.message
    err = refused(lambda: cluster.create(cms(cluster), "ops", {"apiVersion": "v1", "kind": "ConfigMap",
                                                               "metadata": {}}))
    assert err.message == 'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required'
    assert err.details["causes"][0]["reason"] == "FieldValueRequired"


@pytest.mark.parametrize("dry_run", [False, True], ids=["real", "dry-run"])
def test_oversize_data_is_refused_on_create(cluster, dry_run):
    half = LIMIT // 2
    big = cm("big", {"a": "x" * half}, {"b": base64.b64encode(b"y" * (half + 1)).decode()})
    before = stored(cluster)
    err = refused(lambda: cluster.create(cms(cluster), "ops", big, RequestContext(dry_run=dry_run)))
    assert err.message == f'ConfigMap "big" is invalid: []: {SIZE_BODY}'
    assert err.details == {"name": "big", "kind": "ConfigMap",
                           "causes": [{"reason": "FieldValueTooLong", "message": SIZE_BODY, "field": "[]"}]}
    assert stored(cluster) == before


def test_exactly_the_limit_is_accepted_and_binary_data_counts_decoded(cluster):
    half = LIMIT // 2
    ok = cm("edge", {"a": "x" * half}, {"b": base64.b64encode(b"y" * (LIMIT - half)).decode()})
    assert cluster.create(cms(cluster), "ops", ok)["metadata"]["name"] == "edge"
    multibyte = cm("utf8", {"a": "é" * (LIMIT // 2 + 1)})     # two bytes each: over the limit
    assert refused(lambda: cluster.create(cms(cluster), "ops", multibyte)).message.endswith(SIZE_BODY)


@pytest.mark.parametrize("dry_run", [False, True], ids=["real", "dry-run"])
@pytest.mark.parametrize("verb", ["update", "merge", "json", "strategic", "apply"])
def test_oversize_data_is_refused_on_every_update(cluster, verb, dry_run):
    current = cluster.create(cms(cluster), "ops", cm("grow", {"k": "v"}))
    before = stored(cluster)
    huge = "x" * (LIMIT + 1)
    ctx = RequestContext(dry_run=dry_run, field_manager="me")
    patch = {"merge": {"data": {"k": huge}}, "strategic": {"data": {"k": huge}},
             "json": [{"op": "replace", "path": "/data/k", "value": huge}],
             "apply": cm("grow", {"k": huge})}.get(verb)

    def call():
        if verb == "update":
            return cluster.update(cms(cluster), "ops", "grow", {**current, "data": {"k": huge}}, ctx)
        # data.k belongs to its creator: an apply changing it forces, or it conflicts before validation
        return cluster.patch(cms(cluster), "ops", "grow", verb, patch, ctx, force=verb == "apply")
    assert refused(call).message == f'ConfigMap "grow" is invalid: []: {SIZE_BODY}'
    assert stored(cluster) == before


def test_keys_duplicates_and_immutable(cluster):
    body = cm("keys", {"bad key": "v", "dup": "1"}, {"dup": base64.b64encode(b"2").decode()})
    err = refused(lambda: cluster.create(cms(cluster), "ops", body))
    assert err.message == (
        'ConfigMap "keys" is invalid: [data[bad key]: Invalid value: "bad key": a valid config key must consist of '
        "alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for "
        "validation is '[-._a-zA-Z0-9]+'), data[dup]: Invalid value: \"dup\": duplicate of key present in binaryData]")
    frozen = cluster.create(cms(cluster), "ops", cm("frozen", {"k": "v"}, immutable=True))
    for dry_run in (True, False):
        err = refused(lambda: cluster.update(cms(cluster), "ops", "frozen", {**frozen, "data": {"k": "w"}},
                                             RequestContext(dry_run=dry_run)))
        assert err.message == ('ConfigMap "frozen" is invalid: data: Forbidden: field is immutable when `immutable` '
                               "is set")
        assert err.details["causes"][0]["reason"] == "FieldValueForbidden"
    labelled = cluster.patch(cms(cluster), "ops", "frozen", "merge", {"metadata": {"labels": {"a": "b"}}})
    assert labelled["metadata"]["labels"] == {"a": "b"}       # metadata may still change


def test_other_kinds_name_errors_name_their_group(cluster):
    deployments = cluster.registry.by_key("deployments.apps")
    web = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "Web"}}
    err = refused(lambda: cluster.create(deployments, "ops", web, RequestContext(dry_run=True)))
    assert err.message.startswith('Deployment.apps "Web" is invalid: metadata.name: Invalid value: "Web": a lowercase')
    assert err.details["group"] == "apps" and err.details["kind"] == "Deployment"
