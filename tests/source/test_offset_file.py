"""The reflex-lite offset file: one live source per file, atomic replacement, clear errors.

Two sources on one offset file would both deliver every event and overwrite each other's
offset, so the second is refused; a crashed holder leaves no lock behind; a reader of the file
sees one whole state or the next, whoever else writes it; a damaged file stops the source with
an error naming it and how to recover.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from datahub.metadata.schema_classes import DatasetPropertiesClass

from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.errors import ReflexError
from reflex_actions.source.lite_change_feed import ChangeFeedError
from reflex_actions.source.lite_change_feed.lite_change_feed_source import _Offsets
from tests.source.test_lite_change_feed import DATASET, drain, feed, parse, write

REPO = Path(__file__).resolve().parents[2]
IN_USE = r"is in use by another reflex-lite source"
ROWID = "'offset' must be a Lite rowid (an integer >= 0)"

# A second process with its own reflex-lite source on argv[1]'s store. "hold": take every event,
# ack it, say so on stdout and wait to be killed; "try": report how creating the source went;
# "crash": die of SIGKILL in the middle of persisting its first ack.
CHILD = """
import os
import signal
import sys
from datahub_actions.pipeline.pipeline_context import PipelineContext
from reflex_actions.source.lite_change_feed import ChangeFeedError, LiteChangeFeedSource

config = {"store": sys.argv[1], "stop_when_idle": True, "poll_interval_seconds": 0.01}
try:
    source = LiteChangeFeedSource.create(config, PipelineContext("child", None))
except ChangeFeedError as error:
    print(error, flush=True)
    sys.exit(3)
if sys.argv[2] == "try":
    print("started", flush=True)
    source.close()
    sys.exit(0)
if sys.argv[2] == "crash":  # killed while it replaces the offset file for its first ack
    os.replace = lambda *paths: os.kill(os.getpid(), signal.SIGKILL)
    source.ack(next(iter(source.events())))
for envelope in source.events():
    source.ack(envelope)
print("holding", flush=True)
sys.stdin.read()
"""


def child(store: LiteCatalog, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(store.path), mode],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LiteCatalog]:
    catalog = LiteCatalog(tmp_path / "lite.db")
    yield catalog
    catalog.close()


def offset_file(catalog: LiteCatalog) -> Path:
    return Path(f"{catalog.path}.reflex-offset")


def names(events: list[Any]) -> list[str]:
    return [parse(DatasetPropertiesClass, e.event.aspect.value).name for e in events]


def test_a_second_source_on_the_same_offset_file_is_refused(store: LiteCatalog) -> None:
    write(store, DATASET, DatasetPropertiesClass(name="payments"))
    first = feed(store, stop_when_idle=False)
    pinned = offset_file(store).read_text()

    with pytest.raises(ChangeFeedError, match=IN_USE) as refused:
        feed(store)

    message = str(refused.value)
    assert str(offset_file(store)) in message
    assert f"process {os.getpid()}" in message
    assert "give this source its own offset_file" in message
    assert offset_file(store).read_text() == pinned  # the refused source wrote nothing
    first.close()
    assert names(drain(feed(store))) == ["payments"]  # closing released the file


def test_an_offset_lock_that_is_a_symlink_is_refused(store: LiteCatalog, tmp_path: Path) -> None:
    """Its holder truncates the lock file and writes its process id there: never through a
    symlink."""
    outside = tmp_path / "outside.txt"
    outside.write_text("theirs")
    Path(f"{offset_file(store)}.lock").symlink_to(outside)

    with pytest.raises(ReflexError, match=r"\.reflex-offset\.lock' in .* is a symlink"):
        feed(store)

    assert outside.read_text() == "theirs"


def test_a_source_in_another_process_is_refused(store: LiteCatalog) -> None:
    holder = feed(store, stop_when_idle=False)
    try:
        out, err = child(store, "try").communicate(timeout=60)
    finally:
        holder.close()

    assert err == ""
    assert IN_USE in out
    assert str(offset_file(store)) in out
    assert f"process {os.getpid()}" in out
    out, err = child(store, "try").communicate(timeout=60)
    assert (out, err) == ("started\n", "")


def test_a_holder_killed_with_sigkill_leaves_no_stale_lock(store: LiteCatalog) -> None:
    write(store, DATASET, DatasetPropertiesClass(name="before the crash"))
    holder = child(store, "hold")
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "holding\n"
        with pytest.raises(ChangeFeedError, match=IN_USE):
            feed(store)  # the child really holds the file
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.communicate(timeout=60)
    assert holder.returncode == -signal.SIGKILL

    write(store, DATASET, DatasetPropertiesClass(name="after the crash"))
    assert names(drain(feed(store))) == ["after the crash"]  # resumes at the child's acks


def test_a_crash_while_saving_keeps_the_old_state_and_leaves_no_litter(
    store: LiteCatalog,
) -> None:
    write(store, DATASET, DatasetPropertiesClass(name="payments"))
    feed(store).close()  # pins the start
    pinned, files = offset_file(store).read_text(), sorted(store.path.parent.iterdir())

    crashed = child(store, "crash")
    assert crashed.communicate(timeout=60) == ("", "")
    assert crashed.returncode == -signal.SIGKILL
    assert offset_file(store).read_text() == pinned

    restarted = feed(store)
    assert sorted(store.path.parent.iterdir()) == files  # the crash's temp file is gone
    assert names(drain(restarted)) == ["payments"]  # the unsaved ack is delivered again


def stray_files(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p != path)


def test_two_writers_on_one_offset_file_do_not_collide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writers that take no lock (an older Reflex): B saves whole while A waits to sync.

    On one fixed temp name B renames A's temp file away and A's own rename fails.
    """
    path = tmp_path / "offset"
    first, second = _Offsets(path, 1, set()), _Offsets(path, 2, set())
    real_fsync = os.fsync
    interleaved: list[bool] = []

    def fsync(fd: int) -> None:
        if not interleaved:
            interleaved.append(True)
            second.save()
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    first.save()

    assert interleaved
    assert json.loads(path.read_text()) == {"offset": 1, "acked": []}  # the last rename wins
    assert stray_files(path) == []


def test_a_reader_never_sees_a_partial_offset_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A has written and synced its state, B has just opened its temp file: A renames, we read.

    On one fixed temp name B's open truncated A's file, which A then renames into place.
    """
    path = tmp_path / "offset"
    first, second = _Offsets(path, 1, set()), _Offsets(path, 2, set())
    main = threading.current_thread()
    first_synced, release_first = threading.Event(), threading.Event()
    seen: list[Any] = []
    failures: list[BaseException] = []
    real_fsync, real_dump = os.fsync, json.dump

    def fsync(fd: int) -> None:
        if threading.current_thread() is not main:
            first_synced.set()
            assert release_first.wait(timeout=30)
        real_fsync(fd)

    def dump(state: Any, handle: Any, **options: Any) -> None:
        if threading.current_thread() is main and not seen:
            release_first.set()
            writer.join(timeout=30)
            seen.append(json.loads(path.read_text()))  # what a reader sees right now
        real_dump(state, handle, **options)

    def save_first() -> None:
        try:
            first.save()
        except BaseException as error:  # re-raised by the assertions below
            failures.append(error)

    writer = threading.Thread(target=save_first)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(json, "dump", dump)
    writer.start()
    assert first_synced.wait(timeout=30)
    second.save()

    assert not writer.is_alive()
    assert failures == []
    assert seen == [{"offset": 1, "acked": []}]
    assert json.loads(path.read_text()) == {"offset": 2, "acked": []}
    assert stray_files(path) == []


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "it is empty"),
        (b'{"offset": 3, "ack', "it is not JSON (line 1 column 15)"),
        (b"\xff\xfe{}", "it is not UTF-8"),
        (b"[3]", "it is not a JSON object"),
        (b'{"offset": 3}', "'acked' must be a list of Lite rowids above 'offset'"),
        (b'{"offset": "3", "acked": []}', ROWID),
        (b'{"offset": 1.5, "acked": []}', ROWID),
        (b'{"offset": true, "acked": []}', ROWID),
        (b'{"offset": -1, "acked": []}', ROWID),
        (b'{"offset": 3, "acked": [2]}', "'acked' must be a list of Lite rowids above 'offset'"),
        (b'{"offset": 3, "acked": ["5"]}', "'acked' must be a list of Lite rowids above 'offset'"),
        (b'{"offset": "' + b"x" * 100_000 + b'", "acked": []}', ROWID),
    ],
)
def test_a_damaged_offset_file_is_named_with_its_recovery(
    store: LiteCatalog, content: bytes, problem: str
) -> None:
    for name in "abcdef":  # rows enough that no offset above is past the end of the store
        write(store, DATASET, DatasetPropertiesClass(name=name))
    offset_file(store).write_bytes(content)

    with pytest.raises(ChangeFeedError) as damaged:
        feed(store)

    message = str(damaged.value)
    assert message == (
        f"unreadable offset file {offset_file(store)}: {problem}; "
        "delete it to read the store again from start_from"
    )
    assert offset_file(store).read_bytes() == content  # kept for inspection
    offset_file(store).unlink()
    feed(store).close()  # the refused source let go of the file


def test_an_offset_file_that_is_a_folder_is_named(store: LiteCatalog) -> None:
    offset_file(store).mkdir()

    with pytest.raises(ChangeFeedError, match=r"unreadable offset file .*: Is a directory"):
        feed(store)
