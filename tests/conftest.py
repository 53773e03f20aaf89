"""Suite-wide settings: hypothesis without wall-clock deadlines (CI machines are noisy), and
the summaries tests record, printed at the end of every run."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ["tests.servers.spark_session"]  # the `spark` fixture (a local Spark)

settings.register_profile(
    "privplan",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile("privplan")
from tests.servers.postgres_server import pg_url  # noqa: F401  (a throw-away PostgreSQL server)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print what tests recorded with ``record_property("summary", text)`` (an oracle's count
    of the combinations it checked): shown under ``-q`` and with xdist too, where a test's
    own output is not (the workers' reports carry their properties to this process)."""
    lines = [str(value) for reports in terminalreporter.stats.values() for report in reports
             if getattr(report, "when", None) == "call"
             for name, value in getattr(report, "user_properties", ()) if name == "summary"]
    if lines:
        terminalreporter.write_sep("-", "summaries recorded by tests")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture(autouse=True)
def _fresh_process_memory() -> None:
    """Each test starts with every process-wide memory empty (:mod:`privplan.process_memory`:
    shared plans, DuckDB files' binds, first atoms, checked expressions and outer queries,
    parsed texts): a test counting planning calls, comparing a kept answer with a fresh one or
    relying on a check running must not meet what another test left."""
    from privplan.process_memory import forget_all

    forget_all()
