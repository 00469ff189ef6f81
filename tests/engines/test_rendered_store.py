"""The CLI keeps what a `control run` rendered on disk, so the next run of the same control on
a snapshot of the same shape reads its SQL back instead of compiling (and importing sqlglot).
What is read back must be exactly what would be rendered; anything else stored there (a
corrupt file, a folder others can write to, code that changed) is a miss, rendered anew."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reflex_actions.cli.main import cli
from reflex_actions.controls.uniqueness import UniquenessControl
from reflex_actions.engines import rendering
from reflex_actions.engines.rendering import RenderedControl, RenderedQuery, RenderedStore
from tests.conftest import write_snapshot

SPEC = "type: uniqueness\nfield: k\n"


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each compile of a uniqueness control (its relation's text_only), with this process's
    memory of rendered controls emptied before each run: only the disk is shared."""
    compiled: list[bool] = []
    original = UniquenessControl.compile

    def counting(self: UniquenessControl, relation, sample_size: int = 5):  # type: ignore[no-untyped-def]
        compiled.append(relation.text_only)
        return original(self, relation, sample_size)

    monkeypatch.setattr(UniquenessControl, "compile", counting)
    return compiled


def run(
    monkeypatch: pytest.MonkeyPatch, spec: Path, snapshot: Path, *options: str
) -> dict[str, Any]:
    """One `control run --json`, as a fresh process would start it: nothing in memory."""
    monkeypatch.setattr(rendering, "_RENDERED", {})
    result = CliRunner().invoke(
        cli, ["control", "run", str(spec), "--snapshot", str(snapshot), "--json", *options]
    )
    assert result.exit_code in (0, 1), result.output
    payload = json.loads(result.output)
    payload.pop("elapsed_ms")
    return payload


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "unique_k.yaml"
    path.write_text(SPEC)
    return path


def entries(cache: Path) -> list[Path]:
    return sorted((cache / "rendered").glob("*.json"))


def test_a_second_run_reads_the_rendered_sql_back_and_gives_the_same_result(
    tmp_path: Path,
    spec: Path,
    own_cache: Path,
    compiles: list[bool],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = write_snapshot(tmp_path / "a.parquet", [{"k": k} for k in (1, 1, 2, 3, 3, 3)])
    second = write_snapshot(tmp_path / "b.parquet", [{"k": k} for k in (7, 8, 9)])
    cold = run(monkeypatch, spec, first)
    assert compiles == [False]
    assert len(entries(own_cache)) == 1
    warm = run(monkeypatch, spec, first)
    assert compiles == [False]  # read back, not compiled
    assert warm == cold
    assert (cold["violation_count"], cold["passed"]) == (3, False)
    other = run(monkeypatch, spec, second)  # another file of the same shape: its own rows
    assert compiles == [False]
    assert (other["violation_count"], other["passed"], other["sample"]) == (0, True, [])
    as_text = write_snapshot(tmp_path / "c.csv", [{"k": "x"}, {"k": "x"}])
    assert run(monkeypatch, spec, as_text)["violation_count"] == 1  # another shape: compiled
    assert compiles == [False, True]
    assert len(entries(own_cache)) == 2


def test_a_smaller_sample_is_another_entry(
    tmp_path: Path,
    spec: Path,
    own_cache: Path,
    compiles: list[bool],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    snapshot = write_snapshot(tmp_path / "a.parquet", [{"k": k} for k in (1, 1, 2, 2, 3, 3)])
    assert len(run(monkeypatch, spec, snapshot)["sample"]) == 3
    assert len(run(monkeypatch, spec, snapshot, "--sample-size", "1")["sample"]) == 1
    assert len(compiles) == 2


@pytest.mark.parametrize(
    "stored",
    [
        "not json {",
        json.dumps({"format": 1, "counts": {"sql": 7, "names": []}}),
        json.dumps(
            {
                "format": 999,
                "counts": {"sql": "SELECT 0, 0", "names": []},
                "sample": None,
                "params": {},
                "sample_is_measures": False,
                "sample_counted": False,
            }
        ),
        "\udcff",
        json.dumps([1, 2]),
    ],
    ids=["not-json", "wrong-types", "another-format", "not-utf8", "a-list"],
)
def test_a_corrupt_entry_is_rendered_anew_and_replaced(
    tmp_path: Path,
    spec: Path,
    own_cache: Path,
    compiles: list[bool],
    monkeypatch: pytest.MonkeyPatch,
    stored: str,
) -> None:
    snapshot = write_snapshot(tmp_path / "a.parquet", [{"k": k} for k in (1, 1, 2)])
    cold = run(monkeypatch, spec, snapshot)
    [entry] = entries(own_cache)
    entry.write_bytes(stored.encode("utf-8", "surrogateescape"))
    assert run(monkeypatch, spec, snapshot) == cold
    assert len(compiles) == 2
    assert json.loads(entry.read_text())["counts"]["sql"].startswith("WITH")  # replaced


def test_a_folder_others_may_write_to_is_never_read(
    tmp_path: Path,
    spec: Path,
    own_cache: Path,
    compiles: list[bool],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stored SQL runs: in a folder someone else could write, an entry saying the snapshot has
    no violations is not believed."""
    snapshot = write_snapshot(tmp_path / "a.parquet", [{"k": k} for k in (1, 1, 2)])
    cold = run(monkeypatch, spec, snapshot)
    [entry] = entries(own_cache)
    planted = json.loads(entry.read_text())
    planted["counts"] = {"sql": "SELECT 3 AS rows_scanned, 0 AS violation_count", "names": []}
    entry.write_text(json.dumps(planted))
    (own_cache / "rendered").chmod(0o777)
    assert run(monkeypatch, spec, snapshot) == cold
    assert len(compiles) == 2
    assert json.loads(entry.read_text()) == planted  # and nothing was written there


def test_an_entry_larger_than_any_rendered_control_is_not_read(
    tmp_path: Path,
    spec: Path,
    own_cache: Path,
    compiles: list[bool],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reading is bounded: a well-formed entry padded past the bound (JSON allows trailing
    blanks) is a miss, never read whole, and its SQL never runs."""
    snapshot = write_snapshot(tmp_path / "a.parquet", [{"k": k} for k in (1, 1, 2)])
    cold = run(monkeypatch, spec, snapshot)
    [entry] = entries(own_cache)
    planted = json.loads(entry.read_text())
    planted["counts"] = {"sql": "SELECT 3 AS rows_scanned, 0 AS violation_count", "names": []}
    entry.write_text(json.dumps(planted) + " " * rendering.MAX_ENTRY_BYTES)
    assert run(monkeypatch, spec, snapshot) == cold
    assert len(compiles) == 2


def test_changed_code_is_a_miss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = RenderedStore(tmp_path)
    key = ("a control", "its shape")
    before = store.digest(key, UniquenessControl)
    monkeypatch.setattr(rendering, "_code_version", lambda control_file: ("edited",))
    assert store.digest(key, UniquenessControl) != before


def rendered_control(**params: Any) -> RenderedControl:
    return RenderedControl(
        counts=RenderedQuery("SELECT 1, 0", frozenset()), sample=None, params=params
    )


def test_values_json_would_change_are_not_stored(tmp_path: Path) -> None:
    store = RenderedStore(tmp_path / "store")
    store.put("kept", rendered_control(values=["a", "b"], low=1, high=2.5, none=None))
    store.put("date", rendered_control(since=dt.date(2026, 1, 1)))
    store.put("tuple", rendered_control(values=("a", "b")))
    store.put("nan", rendered_control(low=float("nan")))
    assert [path.stem for path in (tmp_path / "store").glob("*.json")] == ["kept"]
    assert store.get("kept") == rendered_control(values=["a", "b"], low=1, high=2.5, none=None)


def test_the_store_keeps_at_most_its_entries_the_newest(tmp_path: Path) -> None:
    store = RenderedStore(tmp_path, max_entries=3)
    for number in range(5):
        store.put(f"entry{number}", rendered_control(number=number))
    assert sorted(path.stem for path in tmp_path.glob("*.json")) == [
        "entry2",
        "entry3",
        "entry4",
    ]
    assert list(tmp_path.glob("*.tmp")) == []


def test_a_user_without_a_home_folder_keeps_no_store(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    assert RenderedStore.default({}) is None


def test_where_the_store_is(tmp_path: Path) -> None:
    assert RenderedStore.default({"REFLEX_CACHE_DIR": str(tmp_path)}) == RenderedStore(
        tmp_path / "rendered"
    )
    assert RenderedStore.default({"REFLEX_CACHE_DIR": ""}) is None
    assert RenderedStore.default({"XDG_CACHE_HOME": str(tmp_path)}) == RenderedStore(
        tmp_path / "datahub-reflex" / "rendered"
    )
