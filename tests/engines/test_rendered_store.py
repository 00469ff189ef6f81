"""The CLI keeps what a `control run` rendered on disk, so the next run of the same control on
a snapshot of the same shape reads its SQL back instead of compiling (and importing sqlglot).
What is read back must be exactly what would be rendered; anything else stored there (a
corrupt file, a folder others can write to, code that changed) is a miss, rendered anew."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reflex_actions.cli.main import cli
from reflex_actions.controls.uniqueness import UniquenessControl
from reflex_actions.engines import rendering
from reflex_actions.engines.rendering import RenderedControl, RenderedQuery, RenderedStore
from tests.conftest import write_snapshot
from tests.engines.compiles import count_compiles

SPEC = "type: uniqueness\nfield: k\n"


@dataclass
class Runs:
    """``control run --json`` of a uniqueness spec, each as a fresh process starts it (this
    process's memory of rendered controls emptied: only the disk is shared), the compiles
    they made and the cache folder."""

    spec: Path
    cache: Path
    compiles: list[bool]
    monkeypatch: pytest.MonkeyPatch

    def __call__(self, snapshot: Path, *options: str) -> dict[str, Any]:
        self.monkeypatch.setattr(rendering, "_RENDERED", {})
        result = CliRunner().invoke(
            cli,
            ["control", "run", str(self.spec), "--snapshot", str(snapshot), "--json", *options],
        )
        assert result.exit_code in (0, 1), result.output
        payload = json.loads(result.output)
        payload.pop("elapsed_ms")
        return payload

    def entries(self) -> list[Path]:
        return sorted((self.cache / "rendered").glob("*.json"))

    def planted(self, snapshot: Path) -> tuple[dict[str, Any], Path, dict[str, Any]]:
        """A first run's result, its entry, and that entry saying the snapshot has no
        violations (what an attacker would store)."""
        cold = self(snapshot)
        [entry] = self.entries()
        planted = json.loads(entry.read_text())
        planted["counts"] = {"sql": "SELECT 3 AS rows_scanned, 0 AS violation_count", "names": []}
        return cold, entry, planted


@pytest.fixture
def run(tmp_path: Path, own_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Runs:
    spec = tmp_path / "unique_k.yaml"
    spec.write_text(SPEC)
    return Runs(spec, own_cache, count_compiles(monkeypatch), monkeypatch)


def snapshot(tmp_path: Path, *keys: int) -> Path:
    return write_snapshot(tmp_path / "a.parquet", [{"k": k} for k in keys])


def test_a_second_run_reads_the_rendered_sql_back_and_gives_the_same_result(
    tmp_path: Path, run: Runs
) -> None:
    first = snapshot(tmp_path, 1, 1, 2, 3, 3, 3)
    second = write_snapshot(tmp_path / "b.parquet", [{"k": k} for k in (7, 8, 9)])
    cold = run(first)
    assert run.compiles == [False]
    assert len(run.entries()) == 1
    warm = run(first)
    assert run.compiles == [False]  # read back, not compiled
    assert warm == cold
    assert (cold["violation_count"], cold["passed"]) == (3, False)
    other = run(second)  # another file of the same shape: its own rows
    assert run.compiles == [False]
    assert (other["violation_count"], other["passed"], other["sample"]) == (0, True, [])
    as_text = write_snapshot(tmp_path / "c.csv", [{"k": "x"}, {"k": "x"}])
    assert run(as_text)["violation_count"] == 1  # another shape: compiled
    assert run.compiles == [False, True]
    assert len(run.entries()) == 2


def test_a_smaller_sample_is_another_entry(tmp_path: Path, run: Runs) -> None:
    duplicated = snapshot(tmp_path, 1, 1, 2, 2, 3, 3)
    assert len(run(duplicated)["sample"]) == 3
    assert len(run(duplicated, "--sample-size", "1")["sample"]) == 1
    assert len(run.compiles) == 2


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
    tmp_path: Path, run: Runs, stored: str
) -> None:
    duplicated = snapshot(tmp_path, 1, 1, 2)
    cold = run(duplicated)
    [entry] = run.entries()
    entry.write_bytes(stored.encode("utf-8", "surrogateescape"))
    assert run(duplicated) == cold
    assert len(run.compiles) == 2
    assert json.loads(entry.read_text())["counts"]["sql"].startswith("WITH")  # replaced


def test_a_folder_others_may_write_to_is_never_read(tmp_path: Path, run: Runs) -> None:
    """Stored SQL runs: in a folder someone else could write, an entry saying the snapshot has
    no violations is not believed."""
    duplicated = snapshot(tmp_path, 1, 1, 2)
    cold, entry, planted = run.planted(duplicated)
    entry.write_text(json.dumps(planted))
    (run.cache / "rendered").chmod(0o777)
    assert run(duplicated) == cold
    assert len(run.compiles) == 2
    assert json.loads(entry.read_text()) == planted  # and nothing was written there


def test_an_entry_larger_than_any_rendered_control_is_not_read(tmp_path: Path, run: Runs) -> None:
    """Reading is bounded: a well-formed entry padded past the bound (JSON allows trailing
    blanks) is a miss, never read whole, and its SQL never runs."""
    duplicated = snapshot(tmp_path, 1, 1, 2)
    cold, entry, planted = run.planted(duplicated)
    entry.write_text(json.dumps(planted) + " " * rendering.MAX_ENTRY_BYTES)
    assert run(duplicated) == cold
    assert len(run.compiles) == 2


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
