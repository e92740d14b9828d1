"""Who the control plane's processes are: a throwaway CA with the API server's serving
certificate and the service-account keys, the service accounts its controllers act as, and
kubeconfigs that hold their tokens.

The API server's own token is an administrator's (group `system:masters`, allowed everything).
A controller that ran with it would pass every check the kit makes of who writes: the kit's
admission policy lets only those allowed the verb `adopt` on a set hand it a child
(metacontroller/adoption-policy.yaml). So Metacontroller runs as the service account its
production manifests create (`metacontroller` in namespace `metacontroller`, the subject of the
kit's ClusterRoleBinding), bound to `CONTROLLER_ROLE`: every ordinary verb on every resource,
as those manifests grant it, but not `adopt`. What lets it hand a set its children is then the
kit's binding, as on a cluster with a narrower role for Metacontroller.

Standard library only, besides the plane's client and the `openssl` program.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tools.sandbox import kube

JsonObject = dict[str, Any]

SERVICE_ACCOUNTS: Final = kube.Resource("", "v1", "serviceaccounts")
CLUSTER_ROLES: Final = kube.Resource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", namespaced=False
)
CLUSTER_ROLE_BINDINGS: Final = kube.Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", namespaced=False
)
ROLE_BINDINGS: Final = kube.Resource("rbac.authorization.k8s.io", "v1", "rolebindings")

CONTROLLER_ROLE: Final = "sandbox-controller"
ORDINARY_VERBS: Final = (
    "get", "list", "watch", "create", "update", "patch", "delete", "deletecollection",
)  # fmt: skip
TOKEN_SECONDS: Final = 2 * 24 * 3600
"""As long as the plane's certificates are valid."""


@dataclass
class Certificates:
    """A throwaway CA, the API server's serving certificate and the service-account keys."""

    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    service_account_key: Path
    service_account_public: Path


def make_certificates(directory: Path) -> Certificates:
    """A CA, a serving certificate for IP 127.0.0.1 signed by it, and a service-account key pair."""
    files = Certificates(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        server_cert=directory / "server.crt",
        server_key=directory / "server.key",
        service_account_key=directory / "sa.key",
        service_account_public=directory / "sa.pub",
    )
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl(
        "req", "-x509", *ec, "-keyout", files.ca_key, "-out", files.ca_cert,
        "-days", "2", "-subj", "/CN=disaggregatedset-test-ca",
    )  # fmt: skip
    request = directory / "server.csr"
    _openssl(
        "req", *ec, "-keyout", files.server_key, "-out", request, "-subj", "/CN=kube-apiserver",
    )  # fmt: skip
    extensions = directory / "server.ext"
    extensions.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl(
        "x509", "-req", "-in", request, "-CA", files.ca_cert, "-CAkey", files.ca_key,
        "-CAcreateserial", "-days", "2", "-extfile", extensions, "-out", files.server_cert,
    )  # fmt: skip
    _openssl("genrsa", "-out", files.service_account_key, "2048")
    _openssl(
        "rsa", "-in", files.service_account_key, "-pubout", "-out", files.service_account_public
    )
    return files


def _openssl(*arguments: object) -> None:
    subprocess.run(["openssl", *map(str, arguments)], check=True, capture_output=True, timeout=60)


def _created(client: kube.Client, resource: kube.Resource, obj: JsonObject) -> None:
    """Create `obj`, or leave the one that exists (a plane that starts a controller again)."""
    try:
        client.create(resource, obj)
    except kube.ApiError as error:
        if error.code != 409:
            raise


def service_account(client: kube.Client, namespace: str, name: str) -> str:
    """A token of the service account `namespace/name`, created (with its namespace) when it
    does not exist."""
    space = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    _created(client, kube.NAMESPACES, space)
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace},
    }
    _created(client, SERVICE_ACCOUNTS, account)
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": TOKEN_SECONDS},
    }
    path = SERVICE_ACCOUNTS.path(namespace=namespace, name=name) + "/token"
    token: str = client.request("POST", path, body=request)["status"]["token"]
    return token


def bind(
    client: kube.Client, *, role: str, namespace: str, name: str, within: str | None = None
) -> None:
    """Bind the ClusterRole `role` to the service account `namespace/name`: in every namespace,
    or only in `within` (a RoleBinding there)."""
    metadata = {"name": f"{role}-{namespace}-{name}"}
    if within is not None:
        metadata["namespace"] = within
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding" if within is None else "RoleBinding",
        "metadata": metadata,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }
    _created(client, CLUSTER_ROLE_BINDINGS if within is None else ROLE_BINDINGS, binding)


def controller(client: kube.Client, namespace: str, name: str) -> str:
    """A token of the service account `namespace/name`, allowed every ordinary verb on every
    resource (`CONTROLLER_ROLE`) and nothing more."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": CONTROLLER_ROLE},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": list(ORDINARY_VERBS)}],
    }
    _created(client, CLUSTER_ROLES, role)
    bind(client, role=CONTROLLER_ROLE, namespace=namespace, name=name)
    return service_account(client, namespace, name)


def write_kubeconfig(path: Path, *, server: str, ca_file: Path, user: str, token: str) -> Path:
    """A kubeconfig at `path` for `server` as the holder of `token` (named `user` in it)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "test", "cluster": {"server": server, "certificate-authority": str(ca_file)}}
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": user}}],
        "current-context": "test",
    }
    path.write_text(json.dumps(config))
    return path
