"""kubectl, as `kubectl ds` runs it: the user's own binary on PATH with their connection flags
(`-n/--namespace`, `--context`, `--kubeconfig`, and the environment), so no credentials and no
client library of its own, and what it prints read as the hooks read it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from typing import Final

from hooks import api
from hooks.api.documents import JsonObject, list_of
from hooks.cli import console
from hooks.core import records
from hooks.kubectl import rollout
from hooks.wire import objects, values

KUBECTL_TIMEOUT_SECONDS: Final = 120
SETS: Final = f"{api.DS_PLURAL}.{api.GROUP}"
LWS: Final = f"{api.LWS_PLURAL}.{api.LWS_API_VERSION.split('/')[0]}"
REVISIONS: Final = f"{api.REVISION_PLURAL}.{api.GROUP}"


class Kubectl:
    """The kubectl binary with the user's connection flags; any failure is a `console.CliError`
    on one line (kubectl's own words when it has some). Objects and patches go on its standard
    input or in a file, never on its command line: Linux takes no argument over 128 KiB, and a
    set's templates can be ten times that."""

    def __init__(self, args: argparse.Namespace) -> None:
        given = (("kubeconfig", args.kubeconfig), ("context", args.context))
        self._flags = [f"--{flag}={value}" for flag, value in given if value is not None]
        if args.namespace is not None:
            self._flags.append(f"--namespace={args.namespace}")

    def run(self, *arguments: str, stdin: str | None = None) -> str:
        try:
            done = subprocess.run(
                ["kubectl", *self._flags, *arguments],
                input=stdin,
                capture_output=True,
                text=True,
                encoding="utf-8",
                errors="replace",
                timeout=KUBECTL_TIMEOUT_SECONDS,
                check=False,
            )
        except FileNotFoundError:
            raise console.CliError(
                "kubectl is not on PATH, and kubectl ds works through it"
            ) from None
        except subprocess.TimeoutExpired:
            raise console.CliError(
                f"kubectl {arguments[0]} did not finish within {KUBECTL_TIMEOUT_SECONDS} s"
            ) from None
        except OSError as error:
            raise console.CliError(
                f"kubectl {arguments[0]} could not be run: {error.strerror or error}"
            ) from None
        if done.returncode != 0:
            lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
            text = "; ".join(lines) or f"kubectl {arguments[0]} exited with {done.returncode}"
            raise console.CliError(text.removeprefix("error: "))
        return done.stdout

    def patch(self, *arguments: str, body: object) -> str:
        """`kubectl patch ARGUMENTS` with `body`, as JSON, in a temporary file of its own
        (`--patch-file`), which is gone when kubectl has read it."""
        try:
            scratch = tempfile.TemporaryDirectory(prefix="kubectl-ds-")
            path = os.path.join(scratch.name, "patch.json")
            with open(path, "w", encoding="utf-8") as file:
                json.dump(body, file)
        except OSError as error:
            message = f"cannot write a patch for kubectl: {error.strerror or error}"
            raise console.CliError(message) from None
        with scratch:
            return self.run("patch", *arguments, f"--patch-file={path}")

    def get(self, *arguments: str) -> JsonObject:
        """`kubectl get ... -o json`, parsed."""
        return _json_object(self.run("get", *arguments, "--output=json"), "kubectl get")

    def may(self, verb: str, resource: str, name: str, *, namespace: str) -> bool:
        """Whether the user may `verb` `name` of `resource`: a SelfSubjectAccessReview."""
        plural, _, group = resource.partition(".")
        attributes = {"namespace": namespace, "verb": verb, "group": group}
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {**attributes, "resource": plural, "name": name}},
        }
        arguments = ("--filename=-", "--validate=false", "--output=json")
        shown = self.run("create", *arguments, stdin=json.dumps(review))
        status = _json_object(shown, "kubectl create").get("status")
        return isinstance(status, dict) and status.get("allowed") is True

    def get_set(self, name: str, *, managed_fields: bool = False) -> JsonObject:
        """The set as kubectl prints it (with `managedFields` when asked)."""
        return self.get(SETS, name, *(["--show-managed-fields"] if managed_fields else []))

    def read_set(self, name: str) -> records.Parent:
        """The set as the hooks read it."""
        return rollout.read_set(self.get_set(name))

    def lws_of(self, parent: records.Parent) -> list[records.ObservedObject]:
        """The LeaderWorkerSets the set controls."""
        listing = self.get(LWS, f"--selector={api.LABEL_NAME}={parent.name}")
        found = []
        for index, item in enumerate(list_of(listing.get("items"))):
            try:
                lws = objects.parse_object(records.ChildKind.LWS, item, where=f"items[{index}]")
            except values.RequestError as error:
                message = f"kubectl printed an unusable {api.LWS_KIND}: {error}"
                raise console.CliError(message) from None
            if lws.is_controlled_by(parent.uid):
                found.append(lws)
        return found

    def history(self, parent: records.Parent) -> rollout.History:
        """The set's history, from the records with its name label."""
        items = self.get(REVISIONS, f"--selector={api.LABEL_NAME}={parent.name}").get("items")
        try:
            observed = objects.parse_records(list_of(items))
        except values.RequestError as error:
            raise console.CliError(f"kubectl get {REVISIONS}: {error}") from None
        return rollout.records_of(parent, observed)


def _json_object(text: str, command: str) -> JsonObject:
    """What kubectl printed with `--output=json`, parsed: the one place its output is read."""
    try:
        value = json.loads(text)
    except ValueError as error:
        raise console.CliError(f"{command} printed no JSON: {error}") from None
    if not isinstance(value, dict):
        raise console.CliError(f"{command} printed no JSON object")
    return value


def child(item: JsonObject) -> records.ObservedObject | None:
    """An object kubectl listed, read as the hooks read it (None: not of a child kind)."""
    try:
        return objects.parse_child(item, where="kubectl's list")
    except values.RequestError as error:
        raise console.CliError(f"kubectl printed an unusable object: {error}") from None


def items(listing: JsonObject) -> list[JsonObject]:
    return [item for item in list_of(listing.get("items")) if isinstance(item, dict)]
