"""kubesim.protobuf against request bodies captured from the real kubectl (fixtures/protobuf/, made by
capture_protobuf_fixtures.py), plus hand-built bodies for the edge cases and errors."""
import base64
import json
from pathlib import Path

import pytest

from kubesim.protobuf import decode_object

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "protobuf"
INDEX = json.loads((FIXTURES / "index.json").read_text())
WITH_EXPECTED = sorted(name for name, meta in INDEX.items() if meta.get("expected"))


def body(name: str) -> bytes:
    return (FIXTURES / f"{name}.bin").read_bytes()


def decoded(name: str) -> dict:
    return decode_object(body(name))


def drop_nulls(value):
    """kubectl's JSON writes unset pointers/zero times as null (`creationTimestamp: null`); the decoder omits them."""
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value]
    return value


# --- a minimal encoder for hand-built bodies ----------------------------------------------------------------

def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, value) -> bytes:
    if isinstance(value, bool) or isinstance(value, int):
        return varint(number << 3) + varint(int(value))
    if isinstance(value, str):
        value = value.encode()
    return varint(number << 3 | 2) + varint(len(value)) + value


def msg(*fields: bytes) -> bytes:
    return b"".join(fields)


def envelope(api_version: str, kind: str, raw: bytes, encoding: str = "", content_type: str = "") -> bytes:
    type_meta = msg(field(1, api_version), field(2, kind))
    return b"k8s\x00" + msg(field(1, type_meta), field(2, raw), field(3, encoding), field(4, content_type))


def unwrap(data: bytes) -> tuple[bytes, bytes]:
    """Split a captured body into (typeMeta bytes, raw bytes) by walking the runtime.Unknown fields."""
    pos, parts = 4, {}
    while pos < len(data):
        key = data[pos]
        pos += 1
        length, shift = 0, 0
        while True:
            b = data[pos]
            pos += 1
            length |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        parts[key >> 3] = data[pos:pos + length]
        pos += length
    return parts[1], parts[2]


# --- the captured fixtures ----------------------------------------------------------------------------------

def test_fixture_set_covers_the_generators_and_all_posted_protobuf():
    required = {"configmap", "namespace", "job_from_cronjob", "deployment", "secret_generic", "poddisruptionbudget",
                "priorityclass", "service_clusterip"}
    assert required <= set(INDEX)
    for name, meta in INDEX.items():
        assert meta["method"] == "POST", name
        assert meta["content_type"] == "application/vnd.kubernetes.protobuf", name
        assert body(name).startswith(b"k8s\x00"), name
        assert len(body(name)) == meta["body_bytes"], name


@pytest.mark.parametrize("name", WITH_EXPECTED)
def test_decodes_like_kubectl_dry_run_json(name):
    expected = drop_nulls(json.loads((FIXTURES / INDEX[name]["expected"]).read_text()))
    assert decoded(name) == expected


@pytest.mark.parametrize("name", sorted(INDEX))
def test_decoded_object_matches_the_request_path(name):
    obj = decoded(name)
    path = INDEX[name]["path"].strip("/").split("/")
    group_version = "v1" if path[0] == "api" else "/".join(path[1:3])
    if path[-1] != "token":  # a subresource of another group's kind: serviceaccounts/<name>/token
        assert obj["apiVersion"] == group_version
    namespace = obj["metadata"].get("namespace")
    if "namespaces" in path[:-1] and obj["kind"] != "Namespace":
        assert namespace in (None, path[path.index("namespaces") + 1])
    else:
        assert namespace is None


def test_configmap():
    assert decoded("configmap") == {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm1", "namespace": "default"},
        "data": {"a": "1", "b": "two"},
    }


def test_configmap_binary_data_is_base64():
    obj = decoded("configmap_binary")
    blob = bytes([0, 1, 2, 0xFE, 0xFF]) + b"not utf-8 \xc3\x28"
    assert obj["binaryData"] == {"blob.bin": base64.b64encode(blob).decode()}
    assert obj["data"] == {"text": "hello"}


def test_secret_data_is_base64():
    obj = decoded("secret_generic")
    assert obj["data"] == {"k": base64.b64encode(b"v").decode()}
    assert "type" not in obj  # kubectl leaves it empty for the server to default
    docker = decoded("secret_docker_registry")
    assert docker["type"] == "kubernetes.io/dockerconfigjson"
    config = json.loads(base64.b64decode(docker["data"][".dockerconfigjson"]))
    assert config["auths"]["registry.example"]["username"] == "u"


def test_namespace_keeps_empty_spec_and_status():
    assert decoded("namespace") == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns1"},
                                    "spec": {}, "status": {}}


def test_job_from_cronjob():
    job = decoded("job_from_cronjob")
    meta = job["metadata"]
    assert meta["name"] == "j1" and meta["namespace"] == "descheduler"
    assert meta["labels"] == {"app": "descheduler", "tier": "batch"}
    assert meta["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
    assert meta["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly",
                                        "uid": "6f1c2f3e-8a57-4d1e-9a52-2b7c1f0e9d11", "controller": True}]
    assert "creationTimestamp" not in meta  # the zero Time is omitted
    spec = job["spec"]
    assert spec["backoffLimit"] == 0  # pointer field: zero is kept
    assert spec["ttlSecondsAfterFinished"] == 600
    template = spec["template"]
    assert template["metadata"]["creationTimestamp"] == "2026-01-02T03:04:05Z"
    pod = template["spec"]
    assert pod["terminationGracePeriodSeconds"] == 0
    assert pod["restartPolicy"] == "Never" and pod["serviceAccountName"] == "descheduler-sa"
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["tolerations"][1] == {"key": "dedicated", "operator": "Equal", "value": "batch",
                                     "effect": "NoExecute", "tolerationSeconds": 300}
    term = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["podAffinityTerm"]["labelSelector"]["matchExpressions"] == [
        {"key": "tier", "operator": "NotIn", "values": ["web"]}]
    (container,) = pod["containers"]
    assert container["args"] == ["--policy-config-file=/policy-dir/policy.yaml", "--v=3"]
    assert container["resources"] == {"limits": {"cpu": "1", "memory": "1Gi"},
                                      "requests": {"cpu": "500m", "memory": "256Mi"}}
    assert container["volumeMounts"][0] == {"name": "policy-volume", "mountPath": "/policy-dir", "readOnly": True}
    assert container["env"][2]["valueFrom"] == {"configMapKeyRef": {"name": "descheduler-policy", "key": "mode",
                                                                    "optional": True}}
    assert container["envFrom"] == [{"prefix": "DS_", "secretRef": {"name": "descheduler-env"}}]
    assert container["livenessProbe"]["httpGet"]["port"] == 10258  # IntOrString, int
    assert container["readinessProbe"] == {"tcpSocket": {"port": "metrics"}, "periodSeconds": 5}  # string
    assert container["securityContext"]["privileged"] is False and container["securityContext"]["runAsUser"] == 0
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["policy-volume"] == {"name": "policy-volume", "configMap": {
        "name": "descheduler-policy", "items": [{"key": "policy.yaml", "path": "policy.yaml"}], "defaultMode": 420}}
    assert volumes["tmp"] == {"name": "tmp", "emptyDir": {}}
    assert volumes["cache"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "64Mi"}
    assert volumes["creds"]["secret"] == {"secretName": "descheduler-creds", "optional": False}
    assert volumes["data"]["persistentVolumeClaim"] == {"claimName": "descheduler-data", "readOnly": True}
    assert volumes["host"]["hostPath"] == {"path": "/var/log", "type": "Directory"}


def test_deployment_replicas_including_zero():
    dep = decoded("deployment")
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    assert dep["spec"]["template"]["spec"]["containers"] == [{"name": "nginx", "image": "nginx", "resources": {}}]
    zero = decoded("deployment_ports")
    assert zero["spec"]["replicas"] == 0
    assert zero["spec"]["template"]["spec"]["containers"][0]["ports"] == [{"containerPort": 8080}]


def test_pdb_int_or_string():
    assert decoded("poddisruptionbudget")["spec"]["minAvailable"] == 1
    spec = decoded("poddisruptionbudget_percent")["spec"]
    assert spec["maxUnavailable"] == "50%" and "minAvailable" not in spec


def test_priorityclass_value_kept_when_zero():
    assert decoded("priorityclass")["value"] == 1000
    zero = decoded("priorityclass_zero")
    assert zero["value"] == 0 and zero["preemptionPolicy"] == "Never" and zero["description"] == "zero"


def test_service_ports():
    spec = decoded("service_clusterip")["spec"]
    assert spec["type"] == "ClusterIP"
    assert spec["ports"] == [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}]
    assert decoded("service_nodeport")["spec"]["ports"][0]["nodePort"] == 30080
    assert decoded("service_headless")["spec"]["ports"][0]["targetPort"] == "http"
    assert decoded("service_externalname")["spec"]["externalName"] == "db.example.com"


def test_token_request_has_no_dry_run_but_decodes():
    assert INDEX["token"]["expected"] is None
    assert decoded("token") == {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": {},
                                "spec": {"audiences": ["https://example"], "expirationSeconds": 600},
                                "status": {}}


# --- hand-built bodies ------------------------------------------------------------------------------------

def test_unknown_kind_yields_only_metadata():
    raw = unwrap(body("configmap"))[1]
    obj = decode_object(envelope("example.com/v1", "Widget", raw))
    assert obj == {"apiVersion": "example.com/v1", "kind": "Widget",
                   "metadata": {"name": "cm1", "namespace": "default"}}
    # a known kind at another version is unknown too
    assert set(decode_object(envelope("v2", "ConfigMap", raw))) == {"apiVersion", "kind", "metadata"}


def test_unknown_fields_are_skipped():
    raw = unwrap(body("configmap"))[1]
    extra = (field(99, 7) + field(98, b"\x01\x02") + varint(97 << 3 | 1) + b"12345678"
             + varint(96 << 3 | 5) + b"1234")
    assert decode_object(envelope("v1", "ConfigMap", raw + extra)) == decoded("configmap")


def test_time_negative_ints_packed_repeated_and_managed_fields():
    meta = msg(field(1, "p"), field(8, msg(field(1, 1767323045), field(2, 999))),
               field(17, msg(field(1, "kubectl"), field(2, "Update"), field(4, msg(field(1, 86400))),
                             field(6, "FieldsV1"), field(7, msg(field(1, b'{"f:data":{}}'))))))
    packed = varint(4 << 3 | 2) + varint(2) + varint(5) + varint(6)  # supplementalGroups [5, 6], packed
    security = msg(packed, field(4, 7), field(2, 0))
    pod_spec = msg(field(14, security), field(4, 0))
    obj = decode_object(envelope("v1", "Pod", msg(field(1, meta), field(2, pod_spec))))
    assert obj["metadata"]["creationTimestamp"] == "2026-01-02T03:04:05Z"
    assert obj["metadata"]["managedFields"] == [{"manager": "kubectl", "operation": "Update",
                                                 "time": "1970-01-02T00:00:00Z", "fieldsType": "FieldsV1",
                                                 "fieldsV1": {"f:data": {}}}]
    assert obj["spec"]["securityContext"] == {"supplementalGroups": [5, 6, 7], "runAsUser": 0}
    assert obj["spec"]["terminationGracePeriodSeconds"] == 0
    prio_body = msg(field(1, msg(field(1, "n"))), field(2, -5))
    prio = decode_object(envelope("scheduling.k8s.io/v1", "PriorityClass", prio_body))
    assert prio["value"] == -5


def test_zero_scalars_of_non_pointer_fields_are_omitted():
    meta = msg(field(1, "x"), field(2, ""), field(7, 0), field(8, b""))
    obj = decode_object(envelope("v1", "ConfigMap", msg(field(1, meta), field(4, False))))
    assert obj == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "immutable": False}


@pytest.mark.parametrize("data, message", [
    (b"", "magic"),
    (b'{"kind": "ConfigMap"}', "magic"),
    (b"k8s\x00\x0a", "truncated varint"),
    (b"k8s\x00\x0a\x80", "truncated varint"),
    (b"k8s\x00\x0a\x10\x0a\x02v1", "claims 16 bytes"),
    (b"k8s\x00\x0b", "wire type 3"),
    (b"k8s\x00\x00\x00", "field number 0"),
    (b"k8s\x00" + b"\x08" + b"\xff" * 11, "longer than 10 bytes"),
    (b"k8s\x00", "no apiVersion/kind"),
    (b"k8s\x00" + field(1, field(1, "v1")), "no apiVersion/kind"),
    (b"k8s\x00" + field(1, 5), "typeMeta: expected a message"),
    (b"k8s\x00" + field(1, field(1, 5)), "apiVersion: expected a length-delimited"),
])
def test_malformed_bodies_raise_value_error(data, message):
    with pytest.raises(ValueError, match=message):
        decode_object(data)


def test_bad_values_inside_the_object_raise_value_error():
    with pytest.raises(ValueError, match=r"gzip"):
        decode_object(envelope("v1", "ConfigMap", b"", encoding="gzip"))
    with pytest.raises(ValueError, match=r"application/json"):
        decode_object(envelope("v1", "ConfigMap", b"", content_type="application/json"))
    with pytest.raises(ValueError, match=r"ConfigMap\.metadata\.name: string is not valid UTF-8"):
        decode_object(envelope("v1", "ConfigMap", field(1, field(1, b"\xff\xfe"))))
    with pytest.raises(ValueError, match=r"ConfigMap\.immutable: expected a varint"):
        decode_object(envelope("v1", "ConfigMap", field(4, b"\x01")))
    with pytest.raises(ValueError, match=r"IntOrString has unknown type 7"):
        decode_object(envelope("policy/v1", "PodDisruptionBudget", field(2, field(1, field(1, 7)))))
    whole = body("configmap")
    with pytest.raises(ValueError, match="claims"):
        decode_object(whole[:-10])  # cut inside the raw object


def test_non_bytes_input_is_a_type_error():
    with pytest.raises(TypeError):
        decode_object("k8s\x00")
