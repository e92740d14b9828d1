"""What the hook server tells its operators (`hooks.server.observability`): the build, the memory of
its processes, the line at start. The per-call log line and the call metrics are pinned through
the app in `test_app.py`.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import subprocess
import sys
import time

import prometheus_client
import pytest

from hooks import version
from hooks.server import observability, settings
from tests.shared import PROJECT_VERSION

RESIDENT = "disaggregatedset_process_resident_memory_bytes"
PEAK = "disaggregatedset_process_peak_resident_memory_bytes"


@pytest.fixture(autouse=True)
def single_process_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(settings.MULTIPROC_ENV, raising=False)


def samples(collector: prometheus_client.registry.Collector) -> dict[tuple[str, str, str], float]:
    """(metric, role, pid) → value of what a collector reports now."""
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector)
    found = {}
    for family in registry.collect():
        for sample in family.samples:
            key = (sample.name, sample.labels.get("role", ""), sample.labels.get("pid", ""))
            found[key] = sample.value
    return found


def test_the_build_info_names_the_package_and_python_versions() -> None:
    found = {
        (sample.labels["version"], sample.labels["python"]): sample.value
        for family in observability.BuildInfo().collect()
        for sample in family.samples
    }

    assert found == {(version.package_version(), platform.python_version()): 1.0}
    assert version.package_version() == PROJECT_VERSION


def test_server_memory_reports_the_server_its_workers_and_their_children() -> None:
    """Issue 17, item 14: in multiprocess mode prometheus_client collects no process metrics.
    This process stands for the arbiter, a child of it for a worker, and the worker's child for
    a process answering a large body."""
    worker = subprocess.Popen(
        [sys.executable, "-c", "import os, time; os.fork(); time.sleep(60)"],
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            found = samples(observability.ServerMemory(os.getpid()))
            if found[(RESIDENT, "call", "")] > 0 or time.monotonic() > deadline:
                break
            time.sleep(0.05)  # poll interval while the worker forks
    finally:
        worker.kill()
        worker.wait()

    arbiter = str(os.getpid())
    assert 0 < found[(RESIDENT, "arbiter", arbiter)] <= found[(PEAK, "arbiter", arbiter)]
    assert found[(RESIDENT, "worker", str(worker.pid))] > 0
    assert found[(RESIDENT, "call", "")] > 0
    assert found[(PEAK, "call", "")] >= found[(RESIDENT, "call", "")]


def test_server_memory_of_a_process_that_is_gone_is_empty() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()

    found = samples(observability.ServerMemory(gone.pid))

    assert found == {
        (RESIDENT, "call", ""): 0.0,
        (PEAK, "call", ""): 0.0,
    }


def test_single_process_metrics_include_the_build_info() -> None:
    text = observability.Metrics().exposition().decode()

    assert 'disaggregatedset_build_info{python="' in text
    assert "process_resident_memory_bytes" in text  # prometheus_client's own, one process


def test_the_start_line_names_the_version_and_what_it_is_given(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="hooks")

    observability.log_start({"bind": ["127.0.0.1:8080"], "max_body_bytes": 5})

    [record] = [r for r in caplog.records if r.name == "hooks.server"]
    line = json.loads(observability.JsonFormatter().format(record))
    assert line["message"] == "serving"
    assert line["version"] == PROJECT_VERSION
    assert line["bind"] == ["127.0.0.1:8080"]
    assert line["max_body_bytes"] == 5
