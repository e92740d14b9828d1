"""Generator of `install.yaml`: the whole kit as one file, for `kubectl apply --server-side -f`.

The file is `kubectl kustomize` of the repository root (kustomization.yaml) under a header that
says how to use it and how it was made. kustomization.yaml stays the source; this file is
regenerated after any change to the kit, and a test fails when it is stale.

Usage: `python -m tools.install_yaml [--check]`. `--check` compares instead of writing and exits 1
when the file is out of date. Needs `kubectl` (its built-in kustomize) on PATH.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
OUTPUT: Final = REPO_ROOT / "install.yaml"
KUBECTL_TIMEOUT_S: Final = 120

HEADER: Final = """\
# disaggregatedset-hooks: the CRDs, the two CompositeControllers, the hook server (Deployment,
# Service, PodDisruptionBudget, NetworkPolicy), the aggregated user roles and the adoption
# policy (only Metacontroller and admins hand a set its children), in namespace
# disaggregatedset-system. Prerequisites: Metacontroller v4.17.x and LeaderWorkerSet.
#
# Install (and later upgrade) with the image you built and pushed:
#
#   sed 's|image: disaggregatedset-hooks:|image: REGISTRY/disaggregatedset-hooks:|' install.yaml \\
#     | kubectl apply --server-side -f -
#
# As it is, `kubectl apply --server-side -f install.yaml` runs the image
# disaggregatedset-hooks:0.2.0 (for a local cluster that loaded a local build).
#
# Generated from kustomization.yaml by `python -m tools.install_yaml`; do not edit. To change
# the image, namespace, replicas or resources declaratively, use an overlay
# (examples/overlay/) with `kubectl apply -k`.
"""


class GenerationError(Exception):
    """The kustomize build failed or warned."""


class KubectlMissing(GenerationError):
    """kubectl, whose built-in kustomize renders the kit, is not on PATH."""


def kustomize_build(directory: Path) -> str:
    """`kubectl kustomize directory`. A warning (a deprecated or ignored field, which the kit must
    not use) is an error like a failed build."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise KubectlMissing("kubectl is not on PATH (its built-in kustomize renders the kit)")
    try:
        proc = subprocess.run(
            [kubectl, "kustomize", str(directory)],
            capture_output=True,
            text=True,
            timeout=KUBECTL_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise GenerationError(f"kubectl kustomize took more than {KUBECTL_TIMEOUT_S} s") from None
    if proc.returncode != 0 or "warning" in proc.stderr.lower():
        raise GenerationError(f"kubectl kustomize {directory}: {proc.stderr.strip()}")
    return proc.stdout


def render(root: Path = REPO_ROOT) -> str:
    """The text install.yaml must hold: the header, then `kubectl kustomize root`."""
    return HEADER + "---\n" + kustomize_build(root)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point: write or check install.yaml."""
    parser = argparse.ArgumentParser(prog="python -m tools.install_yaml", description=__doc__)
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    try:
        text = render()
    except GenerationError as error:
        print(f"install_yaml: {error}", file=sys.stderr)
        return 2
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            print(
                f"install_yaml: {OUTPUT.name} is out of date; run `python -m tools.install_yaml`",
                file=sys.stderr,
            )
            return 1
        print(f"{OUTPUT.name} is up to date")
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
