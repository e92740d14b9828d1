"""Suite-wide test configuration."""

from __future__ import annotations

import os
from typing import Any

import flask
import pytest
from flask.testing import FlaskClient
from hypothesis import HealthCheck, settings

from tools.sandbox import assets

pytest_plugins = ["tests.skips"]  # the run ends with one line per skip reason

settings.register_profile(
    "ci", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "dev", max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--lws-release",
        choices=assets.LWS_RELEASES,
        default=assets.REFERENCE_LWS,
        help="the LeaderWorkerSet CRD the cluster suite runs against (tests marked"
        " lws_releases also run against the others); default: %(default)s",
    )


class ServedClient(FlaskClient):
    """A Flask test client that reads each answer whole and closes it, as a server does.

    The hook server counts and logs a call once its answer is sent (when the response closes), so
    a test sees the metrics and the log line as soon as the call returns.
    """

    def open(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("buffered", True)
        return super().open(*args, **kwargs)


flask.Flask.test_client_class = ServedClient
