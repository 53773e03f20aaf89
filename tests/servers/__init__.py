"""The engine and browser tests' servers, and the one place that decides what happens when a
package they need is missing.

The full test extra (``pip install -e ".[test]"``, what CI installs) has everything. The light
extra for contributors (``pip install -e ".[dev]"``) leaves out psycopg, pyspark and playwright
(most of the download): the tests needing them are skipped there with the reason and the
install command. Under ``CI`` (set by .ci/run and CI services) a missing one fails instead: CI
installs the full extra, so a missing package is a broken setup, and the PostgreSQL, Spark and
browser tests must never pass by being skipped.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

FULL_EXTRA = 'pip install -e ".[test]"'

# module -> the tests that need it (the light [dev] extra leaves these three out)
OPTIONAL = {
    "psycopg": "the PostgreSQL engine tests",
    "pyspark": "the Spark engine tests",
    "playwright.sync_api": "the browser tests of the notebook views",
}
# programs (not Python packages) some tests drive; .ci/run installs them
TOOLS = {
    "jdbc": "the PostgreSQL JDBC driver test of privplan serve",
    "node": "the node-postgres test of privplan serve",
}


def missing(module: str, reason: str, fix: str = "") -> None:
    """Skip the calling test (or module): what ``module`` serves is unavailable for ``reason``
    (``fix``: how to make it available; default, the full test extra) — or, under CI, fail
    it."""
    what = OPTIONAL.get(module) or TOOLS.get(module, "these tests")
    if os.environ.get("CI"):
        pytest.fail(f"{what} cannot run under CI={os.environ['CI']}: {reason}. CI must have "
                    f"what they need ({fix or FULL_EXTRA}): they must run there, never be "
                    "skipped", pytrace=False)
    fix = fix or f"{FULL_EXTRA} installs it (the light [dev] extra leaves it out)"
    pytest.skip(f"{what} skipped: {reason}; {fix}", allow_module_level=True)


def need(module: str) -> ModuleType:
    """``import module``, or skip the tests that need it (locally) / fail them (CI): see the
    module doc. Works at module level (collection) and in fixtures and tests."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        missing(module, f"{module.split('.')[0]} is not installed ({err})")
        raise  # (not reached: skip and fail raise)
