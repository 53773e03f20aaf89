"""Suite-wide settings: hypothesis without wall-clock deadlines (CI machines are noisy)."""

from __future__ import annotations

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
