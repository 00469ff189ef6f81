"""The test server's life cycle, outside pytest's fixture too (the PostgreSQL benchmark's)."""

from __future__ import annotations

import psycopg
import pytest

from tests.engines import postgres_server as server_module
from tests.engines.postgres_server import ServerError, running_server


def test_running_server_serves_a_password_login_until_left() -> None:
    with running_server() as server:
        assert server.host == "127.0.0.1" and server.database == "reflex"
        with psycopg.connect(server.url()) as connection:
            assert connection.execute("SELECT current_database()").fetchone() == ("reflex",)
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(server.url(password="not-the-password"), connect_timeout=5)
    with pytest.raises(psycopg.OperationalError):  # stopped: nothing listens on its port
        psycopg.connect(server.url(), connect_timeout=5)


def test_without_server_binaries_the_error_names_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(server_module.shutil, "which", lambda name: None)
    monkeypatch.setattr(server_module.glob, "glob", lambda pattern: [])
    with pytest.raises(ServerError, match="apt-get install postgresql"), running_server():
        pass
