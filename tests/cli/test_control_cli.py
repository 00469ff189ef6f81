"""The ``datahub-reflex control`` commands: output contracts and exit codes (DESIGN.md §5)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from reflex_actions.cli.main import cli
from tests.conftest import write_snapshot

HOSTILE = 'a"b; DROP TABLE t; --'


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(f"type: uniqueness\nfield: '{HOSTILE}'\n")
    return path


@pytest.fixture
def clean(tmp_path: Path) -> Path:
    return write_snapshot(tmp_path / "2026-09-01.parquet", [{HOSTILE: f"t{i}"} for i in range(4)])


@pytest.fixture
def dirty(tmp_path: Path) -> Path:
    return write_snapshot(tmp_path / "2026-09-02.csv", [{HOSTILE: "t1"}] * 3 + [{HOSTILE: "t2"}])


def invoke(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(arg) for arg in args])
    return result.exit_code, result.output


def test_compile_prints_sql_with_quoted_identifier(spec: Path) -> None:
    code, output = invoke("control", "compile", spec)
    assert code == 0
    assert '"a""b; DROP TABLE t; --"' in output
    assert "LIMIT 5" in output  # the sample's size, a validated whole number


def test_compile_json(spec: Path) -> None:
    code, output = invoke("control", "compile", spec, "--json")
    payload = json.loads(output)
    assert code == 0
    assert payload["type"] == "uniqueness"
    assert payload["parameters"] == {}  # a uniqueness check binds only its snapshot
    assert payload["sql"].startswith("WITH snapshot AS")


def test_run_passing_exits_0(spec: Path, clean: Path) -> None:
    code, output = invoke("control", "run", spec, "--snapshot", clean)
    assert code == 0
    assert output.startswith("PASS")


def test_run_failing_exits_1_with_json_contract(spec: Path, dirty: Path) -> None:
    code, output = invoke("control", "run", spec, "--snapshot", dirty, "--json")
    payload = json.loads(output)
    assert code == 1
    assert payload["passed"] is False
    assert payload["violation_count"] == 2
    assert payload["rows_scanned"] == 4
    assert payload["sample"] == [{"key": {HOSTILE: "t1"}, "occurrences": 3}]
    assert payload["snapshot_id"] == "2026-09-02"
    assert payload["elapsed_ms"] > 0


@pytest.mark.parametrize(
    ("spec_text", "snapshot_name", "message"),
    [
        ("type: nope\n", None, "unknown control type 'nope'"),
        ("type: uniqueness\nfield: x\nextra: 1\n", None, "unknown key 'extra'"),
        ("type: uniqueness\nfield: missing_col\n", None, "schema drift"),
        (None, "absent.parquet", "snapshot not found"),
    ],
)
def test_bad_input_exits_2_with_a_message(
    tmp_path: Path,
    spec: Path,
    clean: Path,
    spec_text: str | None,
    snapshot_name: str | None,
    message: str,
) -> None:
    if spec_text is not None:
        spec.write_text(spec_text)
    snapshot = tmp_path / snapshot_name if snapshot_name else clean
    code, output = invoke("control", "run", spec, "--snapshot", snapshot)
    assert code == 2
    assert message in output
    code, output = invoke("control", "run", spec, "--snapshot", snapshot, "--json")
    assert code == 2
    assert message in json.loads(output)["error"]


def test_missing_spec_file_exits_2(tmp_path: Path) -> None:
    code, output = invoke("control", "compile", tmp_path / "nope.yaml")
    assert code == 2
    assert "cannot read control spec" in output


def test_console_script_is_installed(spec: Path, dirty: Path) -> None:
    executable = Path(sys.executable).parent / "datahub-reflex"
    assert executable.is_file(), "the datahub-reflex console script is not installed"
    completed = subprocess.run(
        [str(executable), "control", "run", str(spec), "--snapshot", str(dirty), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 1
    assert json.loads(completed.stdout)["violation_count"] == 2
