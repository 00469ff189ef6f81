"""A real PostgreSQL server for the engine tests, started once per test run on loopback.

The server is Debian's ``postgresql`` package (``initdb``/``pg_ctl`` on PATH, or under
``/usr/lib/postgresql/*/bin``; ``.ci/run`` installs it when missing): the same server people
run, where a PyPI wheel bundling one would be a second, less used build. A missing server is a
test error naming what to install, never a skip. PostgreSQL refuses to run as root, so under
root (CI) the cluster is created and run by an unprivileged account.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.ports import free_port

#: The accounts a root test run hands the server to, the first that exists: Debian's server
#: account, else the one every Unix has.
SERVER_ACCOUNTS = ("postgres", "nobody")
SUPERUSER = "reflex"
DATABASE = "reflex"
#: How long ``pg_ctl`` may take to start or stop the server before the run errors.
START_TIMEOUT_S = 60


class ServerError(RuntimeError):
    """No server could be started or stopped: what is missing, or the failing tool's output."""


@dataclass(frozen=True)
class PostgresServer:
    """A running server: where it listens and how to log in (the password is a test secret)."""

    host: str
    port: int
    user: str
    password: str
    database: str
    #: seconds from ``initdb`` to a server accepting connections
    started_in_s: float

    def url(self, password: str | None = None, port: int | None = None) -> str:
        """A ``postgresql://`` URL (with another password or port, to test failures)."""
        return (
            f"postgresql://{self.user}:{password or self.password}@{self.host}:"
            f"{port or self.port}/{self.database}"
        )


def server_binaries() -> Path:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres``; fail naming what to install."""
    on_path = shutil.which("initdb")
    candidates = [Path(on_path).parent] if on_path else []
    candidates += sorted(
        (Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")),
        key=lambda folder: int(folder.parent.name) if folder.parent.name.isdigit() else 0,
        reverse=True,
    )
    for folder in candidates:
        if all((folder / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            return folder
    raise ServerError(
        "starting a PostgreSQL server needs Debian's postgresql: install it "
        "(apt-get install postgresql, as .ci/run does) or put initdb and pg_ctl on PATH"
    )


def _server_account() -> pwd.struct_passwd | None:
    """The unprivileged account to run the server as, or None when not root."""
    if os.geteuid() != 0:
        return None
    for name in SERVER_ACCOUNTS:
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise ServerError(
        f"running as root, and none of the accounts {', '.join(SERVER_ACCOUNTS)} exists to "
        "run PostgreSQL as (it refuses to run as root)"
    )


def _run(command: list[str], account: pwd.struct_passwd | None) -> None:
    """Run a server tool (as ``account`` when given); ServerError with its output's end when it
    fails."""
    ids = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []} if account else {}
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=START_TIMEOUT_S, check=False, **ids
    )
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip()[-2000:]
        raise ServerError(f"{Path(command[0]).name} failed ({done.returncode}): {output}")


@contextmanager
def running_server() -> Iterator[PostgresServer]:
    """A fresh cluster in a temporary folder, listening on 127.0.0.1 only (no Unix socket),
    password-authenticated, C locale; stopped and removed on leaving. The tests' fixture and
    the PostgreSQL benchmark share it; ServerError names what is missing or what failed."""
    binaries = server_binaries()
    account = _server_account()
    started = time.perf_counter()
    home = Path(tempfile.mkdtemp(prefix="reflex-postgres-"))
    data = home / "data"
    password = secrets.token_urlsafe(16)
    password_file = home / "password"
    password_file.write_text(password + "\n")
    if account is not None:  # the server account must own its cluster and read the password
        os.chown(home, account.pw_uid, account.pw_gid)
        os.chown(password_file, account.pw_uid, account.pw_gid)
    password_file.chmod(0o600)
    port = free_port()
    try:
        _run(
            [
                str(binaries / "initdb"), "-D", str(data), "-U", SUPERUSER,
                f"--pwfile={password_file}", "--auth=scram-sha-256", "--locale=C",
                "--encoding=UTF8", "--no-sync",
            ],
            account,
        )  # fmt: skip
        server_options = (
            f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories='' "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        _run(
            [
                str(binaries / "pg_ctl"), "-D", str(data), "-l", str(home / "server.log"),
                "-o", server_options, "-w", "-t", str(START_TIMEOUT_S), "start",
            ],
            account,
        )  # fmt: skip
        server = PostgresServer(
            "127.0.0.1", port, SUPERUSER, password, "postgres", time.perf_counter() - started
        )
        _create_database(server)
        yield PostgresServer(**{**server.__dict__, "database": DATABASE})
    finally:
        if (data / "postmaster.pid").exists():
            _run([str(binaries / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], account)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The run's server (``running_server``), started once; a server that cannot start is a
    test error naming why, never a skip."""
    try:
        with running_server() as server:
            yield server
    except ServerError as error:
        pytest.fail(str(error), pytrace=False)


def _create_database(server: PostgresServer) -> None:
    """The tests' own database (``postgres`` stays the maintenance one)."""
    import psycopg

    with psycopg.connect(server.url(), autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{DATABASE}"')


#: The PostgreSQL type a test table's column gets for the Arrow type its values infer (as a
#: Parquet snapshot of the same rows stores them).
_COLUMN_TYPES = {
    "int64": "bigint",
    "double": "double precision",
    "string": "text",
    "large_string": "text",
    "bool": "boolean",
    "date32[day]": "date",
    "timestamp[us]": "timestamp",
    "timestamp[us, tz=UTC]": "timestamptz",
    "null": "text",
}


def create_table(
    server: PostgresServer,
    parts: tuple[str, ...],
    rows: list[dict[str, Any]],
    columns: list[str] | None = None,
) -> None:
    """Create (replacing) the table ``parts`` (schema, table) holding ``rows``, its column
    types those a Parquet file of the same rows has; ``columns`` as ``write_snapshot`` takes."""
    import psycopg
    import pyarrow as pa
    from psycopg import sql

    names = columns or list(rows[0])
    arrow = pa.table({name: [row.get(name) for row in rows] for name in names})
    table = sql.Identifier(*parts)
    definitions = sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(field.name), sql.SQL(_COLUMN_TYPES[str(field.type)]))
        for field in arrow.schema
    )
    with psycopg.connect(server.url(), autocommit=True) as connection:
        if len(parts) > 1:
            connection.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(parts[0]))
            )
        connection.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
        connection.execute(sql.SQL("CREATE TABLE {} ({})").format(table, definitions))
        insert = sql.SQL("INSERT INTO {} VALUES ({})").format(
            table, sql.SQL(", ").join(sql.Placeholder() * len(names))
        )
        with connection.cursor() as cursor:
            cursor.executemany(insert, [[row.get(name) for name in names] for row in rows])
