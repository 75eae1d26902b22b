"""Metadata-only answers and Accept negotiation (apiserver handlers/response.go, negotiation, RequestScope
AllowsMediaTypeTransform): `as=PartialObjectMetadata` for a get or a watch, `as=PartialObjectMetadataList` for a
list, the first acceptable clause of the Accept header wins (by quality), an `as` the server does not know makes a
clause unacceptable and no acceptable clause is 406, as is a transform that does not fit (a list as one object)."""
import pytest

from https_client import call
from raw_http import CMS, NS, VMIS, Stream, cluster_of, configmap, serving

POM = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
POML = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
# what client-go's metadata client sends for a list
METADATA_CLIENT_LIST = ("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
                        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json")


@pytest.fixture
def server():
    with serving() as started:
        call(started, "POST", CMS, configmap("a", {"app": "web"}, k="v"))
        call(started, "POST", CMS, configmap("b", k="v"))
        yield started


def metadata(server, name):
    return cluster_of(server).store.get("configmaps", NS, name).obj["metadata"]


def partial(meta, version="v1"):
    return {"kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{version}", "metadata": meta}


def not_acceptable(message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": "NotAcceptable", "code": 406}


def test_a_get_answers_partial_object_metadata(server):
    assert call(server, "GET", f"{CMS}/a", accept=POM) == (200, partial(metadata(server, "a")))
    beta = POM.replace("v=v1", "v=v1beta1")
    assert call(server, "GET", f"{CMS}/a", accept=beta) == (200, partial(metadata(server, "a"), "v1beta1"))


@pytest.mark.parametrize("accept", [POML, METADATA_CLIENT_LIST, "application/json;q=0.5, " + POML])
def test_a_list_answers_partial_object_metadata_list(server, accept):
    rv = str(cluster_of(server).store.rv)
    assert call(server, "GET", CMS, accept=accept) == (200, {
        "kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv},
        "items": [partial(metadata(server, "a")), partial(metadata(server, "b"))]})


def test_a_paginated_metadata_list_keeps_its_list_metadata(server):
    code, page = call(server, "GET", f"{CMS}?limit=1", accept=POML)
    assert code == 200 and page["items"] == [partial(metadata(server, "a"))]
    assert page["metadata"]["remainingItemCount"] == 1 and page["metadata"]["continue"]


def test_an_unknown_transform_is_skipped_and_none_left_is_406(server):
    unknown = "application/json;as=Foo;g=meta.k8s.io;v=v1"
    accepted = "only the following media types are accepted: application/json, application/yaml, " \
               "application/vnd.kubernetes.protobuf"
    assert call(server, "GET", f"{CMS}/a", accept=unknown) == (406, not_acceptable(accepted))
    assert call(server, "GET", CMS, accept="application/json;as=PartialObjectMetadataList;g=example.com;v=v1") == (
        406, not_acceptable(accepted))
    assert call(server, "GET", f"{CMS}/a", accept="text/html") == (406, not_acceptable(accepted))
    code, obj = call(server, "GET", f"{CMS}/a", accept=unknown + ", application/json")
    assert code == 200 and obj["kind"] == "ConfigMap" and obj["data"] == {"k": "v"}


def test_a_transform_of_the_wrong_shape_is_406(server):
    assert call(server, "GET", CMS, accept=POM) == (406, not_acceptable(
        "you requested PartialObjectMetadata, but the requested object is a list (*core.ConfigMapList)"))
    assert call(server, "GET", f"{CMS}/a", accept=POML) == (406, not_acceptable(
        "you requested PartialObjectMetadataList, but the requested object is not a list (*core.ConfigMap)"))
    assert call(server, "GET", VMIS, accept=POM) == (406, not_acceptable(
        "you requested PartialObjectMetadata, but the requested object is a list (*unstructured.UnstructuredList)"))


def test_custom_resources_answer_metadata_too(server):
    vmi = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "metadata": {"name": "vm-1"},
           "spec": {"domain": {}}}
    created = call(server, "POST", VMIS, vmi)[1]
    code, doc = call(server, "GET", VMIS, accept=POML)
    assert code == 200 and doc["items"] == [partial(created["metadata"])]


def test_a_watch_answers_partial_object_metadata_events(server):
    rv = cluster_of(server).store.rv
    stream = Stream(server, f"{CMS}?watch=true&resourceVersion={rv}&timeoutSeconds=1", accept=POM)
    call(server, "PATCH", f"{CMS}/a", {"data": {"k": "w"}}, content_type="application/merge-patch+json")
    assert stream.rest() == [{"type": "MODIFIED", "object": partial(metadata(server, "a"))}]


def test_kubectl_s_table_request_still_gets_a_table(server):
    kubectl = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
               "application/json")
    code, table = call(server, "GET", CMS, accept=kubectl)
    assert code == 200 and table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert [row["cells"][0] for row in table["rows"]] == ["a", "b"]
    assert table["rows"][0]["object"] == partial(metadata(server, "a"))
    protobuf_table = "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json"
    assert call(server, "GET", CMS, accept=protobuf_table)[1]["kind"] == "ConfigMapList"
