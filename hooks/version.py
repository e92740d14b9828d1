"""The installed package's version, as every front end reports it (`--version`, the hook server's
start-up line and `disaggregatedset_build_info` metric)."""

from __future__ import annotations

from importlib import metadata
from typing import Final

DISTRIBUTION: Final = "disaggregatedset-hooks"


def package_version() -> str:
    """The installed package's version (pyproject.toml's), from its metadata."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"
