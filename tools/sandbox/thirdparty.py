"""The third-party CRDs a control plane installs, when no file of them is found: its own.

The sandbox needs nothing but its four programs (`tools.sandbox.assets`). Metacontroller's CRDs
and the LeaderWorkerSet CRD are found as files when `DS_TESTCLUSTER_ASSETS` (or a caller's
fallback) holds them, as the cluster suite's do; without them the control plane writes these into
its work directory. The sandbox is no installer of Metacontroller or LWS: each CRD is what the
API server must serve for Metacontroller to run and for LWS objects to be stored as on a cluster.

- **Metacontroller** (v4.17.x): CompositeController, DecoratorController and ControllerRevision
  of `metacontroller.k8s.io/v1alpha1`, with the names, scope and `/status` of v4.17.2's CRDs. Their
  schemas keep every field (`x-kubernetes-preserve-unknown-fields`): Metacontroller reads the
  objects the kit holds, which `kubectl apply` then stores as written, where the release's
  schemas would check their fields.
- **LeaderWorkerSet** (`leaderworkerset.x-k8s.io/v1`), as the CRD of upstream commit 060ab4d: its
  `spec` schema is the one the DisaggregatedSet API embeds (`hooks/lws_spec_schema.json`, the same
  defaults and validations, descriptions left out), its status fields, its `/status` and `/scale`
  subresources and its printer columns.

Facts only (names, paths, fields): nothing here is copied from either project.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from hooks.cli import lwsspec
from tools.sandbox.assets import Assets

JsonObject = dict[str, Any]

METACONTROLLER_FILE: Final = "sandbox-metacontroller-crds.json"
LWS_FILE: Final = "sandbox-leaderworkerset-crd.json"
_METACONTROLLER_GROUP: Final = "metacontroller.k8s.io"
# A CRD of a *.k8s.io group is refused without this annotation; Metacontroller's own CRDs say so.
_UNAPPROVED: Final = {"api-approved.kubernetes.io": "unapproved, request not yet submitted"}
_ANY_OBJECT: Final[JsonObject] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_INT32: Final[JsonObject] = {"type": "integer", "format": "int32"}


def files(found: Assets, directory: Path) -> tuple[Path, Path]:
    """The files of Metacontroller's CRDs and of the LeaderWorkerSet CRD to install: those found,
    or this module's, written into `directory`."""
    metacontroller = found.metacontroller_crds or _write(
        directory / METACONTROLLER_FILE, metacontroller_crds()
    )
    lws = found.lws_crd or _write(directory / LWS_FILE, [lws_crd()])
    return metacontroller, lws


def _write(path: Path, crds: list[JsonObject]) -> Path:
    # JSON documents, one a line: YAML to `kubectl apply` and to `install_crds_from`.
    path.write_text("".join(f"---\n{json.dumps(crd)}\n" for crd in crds), encoding="utf-8")
    return path


def metacontroller_crds() -> list[JsonObject]:
    """CompositeController, DecoratorController and ControllerRevision (see the module)."""
    return [
        _crd(
            group=_METACONTROLLER_GROUP,
            kind=kind,
            plural=plural,
            short_names=short_names,
            scope=scope,
            version="v1alpha1",
            schema=_ANY_OBJECT,
            subresources={"status": {}},
            annotations=_UNAPPROVED,
        )
        for kind, plural, short_names, scope in (
            ("CompositeController", "compositecontrollers", ["cc", "cctl"], "Cluster"),
            ("DecoratorController", "decoratorcontrollers", ["dec", "decorators"], "Cluster"),
            ("ControllerRevision", "controllerrevisions", [], "Namespaced"),
        )
    ]


def lws_crd() -> JsonObject:
    """The LeaderWorkerSet CRD (see the module)."""
    status: JsonObject = {
        "type": "object",
        "properties": {
            "conditions": {"type": "array", "items": _ANY_OBJECT},
            "hpaPodSelector": {"type": "string"},
            "observedGeneration": {"type": "integer", "format": "int64"},
            "readyReplicas": _INT32,
            "replicas": _INT32,
            "updatedReplicas": _INT32,
        },
    }
    schema: JsonObject = {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": lwsspec.load_lws_spec_schema(),
            "status": status,
        },
    }
    crd = _crd(
        group="leaderworkerset.x-k8s.io",
        kind="LeaderWorkerSet",
        plural="leaderworkersets",
        short_names=["lws"],
        scope="Namespaced",
        version="v1",
        schema=schema,
        subresources={
            "status": {},
            "scale": {
                "specReplicasPath": ".spec.replicas",
                "statusReplicasPath": ".status.replicas",
                "labelSelectorPath": ".status.hpaPodSelector",
            },
        },
    )
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = [
        {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"},
        {"name": "Desired", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Up-to-date", "type": "integer", "jsonPath": ".status.updatedReplicas"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    return crd


def _crd(
    *,
    group: str,
    kind: str,
    plural: str,
    short_names: list[str],
    scope: str,
    version: str,
    schema: JsonObject,
    subresources: JsonObject,
    annotations: dict[str, str] | None = None,
) -> JsonObject:
    metadata: JsonObject = {"name": f"{plural}.{group}"}
    if annotations:
        metadata["annotations"] = dict(annotations)
    names: JsonObject = {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
    }
    if short_names:
        names["shortNames"] = short_names
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata,
        "spec": {
            "group": group,
            "names": names,
            "scope": scope,
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": subresources,
                }
            ],
        },
    }
