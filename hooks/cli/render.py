"""`render`: the children and status each DisaggregatedSet of some files gets on an empty cluster,
its first sync answered by the hook itself (`hooks.core.sync`) once `hooks.cli.manifests` has
judged and defaulted it. What the set would ignore (`status.warnings`) is a warning line each.
"""

from __future__ import annotations

import argparse

import yaml

from hooks import api
from hooks.cli import console, manifests
from hooks.core import sync
from hooks.wire import answers, envelope


def run(args: argparse.Namespace) -> int:
    invalid = False
    found = False
    outputs = []
    for source in args.files:
        try:
            documents = manifests.read_documents(source)
        except manifests.ManifestError as error:
            for line in error.lines:
                console.report(args.report_as, "error", line)
            invalid = True
            continue
        for document in documents:
            if not manifests.is_set(document):
                console.report(
                    args.report_as, "note", f"{source}: skipping {manifests.describe(document)}"
                )
                continue
            found = True
            problems, output = _render_one(document, now=args.now)
            for problem in problems:
                console.report(
                    args.report_as, "error", manifests.located(source, document, problem)
                )
            for warning in (output or {}).get("status", {}).get("warnings", []):
                console.report(
                    args.report_as, "warning", manifests.located(source, document, warning)
                )
            invalid = invalid or bool(problems)
            if output is not None:
                outputs.append(output)
    if outputs:
        print(yaml.dump_all(outputs, Dumper=_Dumper, sort_keys=False, width=100), end="")
    if not found and not invalid:
        console.report(args.report_as, "error", f"no {api.DS_KIND} in {', '.join(args.files)}")
        invalid = True
    return 1 if invalid else 0


class _Dumper(yaml.SafeDumper):
    """YAML that writes an object appearing twice (a template in two children) out twice, never
    as an anchor and an alias a reader would have to resolve."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def _render_one(document: api.JsonObject, *, now: str) -> tuple[list[str], api.JsonObject | None]:
    """What is wrong with one manifest (refused, or Degraded on its first sync) and, unless
    refused, its first sync's children and status."""
    checked = manifests.check(document)
    if checked.problems:
        return list(checked.problems), None
    request = envelope.parse_sync_request(manifests.empty_cluster_request(checked.stored))
    result = sync.sync(request, now=now)
    response = answers.render_answer(result.answer)
    degraded = [
        f"{c['reason']}: {c['message']}"
        for c in response["status"]["conditions"]
        if c["type"] == api.ConditionType.DEGRADED and c["status"] == api.ConditionStatus.TRUE
    ]
    if result.summary.get("outcome") == "held":  # refused by the hook: nothing to render
        return degraded, None
    return degraded, {"children": response["children"], "status": response["status"]}
