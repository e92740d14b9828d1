"""The kit's tests skip, with the command that fixes it, when a generated CRD is missing
(`tests.kustomize.require_crds`), whichever of the CRDs the kit names it is."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hooks.cli import crdgen
from tests import kustomize


def test_every_generated_crd_is_one_the_kit_names() -> None:
    assert sorted(kustomize.crd_files()) == sorted(
        f"{kustomize.CRDS_DIR}{name}" for name in crdgen.render_crds()
    )


def _checkout(tmp_path: Path, crds: list[str]) -> Path:
    """A root with the kit's kustomization and only the given CRD files."""
    shutil.copy(kustomize.KIT, tmp_path / kustomize.KIT.name)
    (tmp_path / kustomize.CRDS_DIR).mkdir()
    for name in crds:
        (tmp_path / name).write_text("")
    return tmp_path


@pytest.mark.parametrize("absent", kustomize.crd_files())
def test_a_missing_crd_skips_with_its_name_and_the_command(tmp_path: Path, absent: str) -> None:
    root = _checkout(tmp_path, [name for name in kustomize.crd_files() if name != absent])

    with pytest.raises(pytest.skip.Exception) as skipped:
        kustomize.require_crds(root)

    assert str(skipped.value) == f"{absent} not generated yet (python -m hooks crds)"


def test_with_every_crd_generated_nothing_skips(tmp_path: Path) -> None:
    kustomize.require_crds(_checkout(tmp_path, kustomize.crd_files()))
