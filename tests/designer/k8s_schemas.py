"""Validate Kubernetes objects against the published CRDs in ``schemas/`` (sources: SOURCES.md).

An object is checked against the ``openAPIV3Schema`` of the CRD version its ``apiVersion`` names,
made strict the way ``kubectl apply --validate=strict`` is: a field the schema does not declare is
an error, not silently pruned. ``metadata`` is checked against Kubernetes' name and label rules.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path

import jsonschema
import yaml

SCHEMAS = Path(__file__).resolve().parent / "schemas"
CRDS = {
    ("kueue.x-k8s.io", "Topology"): "kueue.x-k8s.io_topologies.yaml",
    ("topology.volcano.sh", "HyperNode"): "topology.volcano.sh_hypernodes.yaml",
    ("k8s.cni.cncf.io", "NetworkAttachmentDefinition"): "k8s.cni.cncf.io_network-attachment-definitions.yaml",
}


def load(name: str) -> dict:
    return yaml.safe_load((SCHEMAS / name).read_text())


def _strict(schema: dict) -> dict:
    """Refuse undeclared fields wherever the schema lists its properties and allows no others."""
    if isinstance(schema, dict):
        if "properties" in schema and "additionalProperties" not in schema:
            schema["additionalProperties"] = False
        for key, value in schema.items():
            if key == "properties":
                for sub in value.values():
                    _strict(sub)
            elif isinstance(value, dict):
                _strict(value)
    return schema


@cache
def object_schema(group: str, kind: str, version: str) -> dict:
    """The strict JSON schema of ``kind`` in ``group/version``; KeyError for an unknown version."""
    crd = load(CRDS[(group, kind)])
    assert crd["spec"]["names"]["kind"] == kind and crd["spec"]["group"] == group
    found = {v["name"]: v for v in crd["spec"]["versions"]}
    served = found[version]
    assert served["served"], f"{group}/{version} is not served"
    schema = _strict(copy.deepcopy(served["schema"]["openAPIV3Schema"]))
    names = load("kubernetes_names.schema.yaml")
    schema["$defs"] = names["$defs"]
    schema["properties"]["metadata"] = {"$ref": "#/$defs/objectMeta"}
    schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "metadata"})
    schema["properties"]["apiVersion"] = {"const": f"{group}/{version}"}
    schema["properties"]["kind"] = {"const": kind}
    return schema


@cache
def _validator(group: str, kind: str, version: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(object_schema(group, kind, version))


def errors(obj: dict) -> list[str]:
    """What the published CRD of ``obj``'s kind says is wrong with it (empty: valid)."""
    group, _, version = obj.get("apiVersion", "").rpartition("/")
    try:
        validator = _validator(group, obj.get("kind", ""), version)
    except KeyError:
        return [f"no published CRD serves {obj.get('apiVersion')} {obj.get('kind')}"]
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)]


def names_schema(definition: str) -> dict:
    """One of the name/label definitions (``labelKey``, ``labelValue``, ``dns1123Subdomain``)."""
    names = load("kubernetes_names.schema.yaml")
    return {"$defs": names["$defs"], "$ref": f"#/$defs/{definition}"}
