from __future__ import annotations

from pathlib import Path

import pytest

import privplan as pp
from privplan.demo.data import demo_policy_path, write_demo_database


@pytest.fixture(scope="session")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("demo") / "demo.duckdb", rows=20_000)


@pytest.fixture(scope="session")
def demo_policy() -> pp.Policy:
    return pp.Policy.from_yaml(demo_policy_path())


@pytest.fixture
def session(demo_db: Path, demo_policy: pp.Policy) -> pp.Session:
    sess = pp.connect(demo_db, policy=demo_policy, budget=pp.PureDP(10))
    yield sess
    sess.close()
