"""Every command, given bad input, says what is wrong on one line and exits 2: no traceback, and
nothing created or written (the working folder is the same, byte for byte, after the command).

The cases cover each class of bad input that applies to a command: a missing path, a file of the
wrong type (README.md as a store, spec, snapshot or pipeline), a folder for a file or a file for
a folder, malformed YAML and a YAML alias bomb, an unknown urn or lesson, an out-of-range number,
an empty string, a URL for a path. Every command the CLI registers must have cases: one added
later without any fails ``test_every_command_has_bad_input_cases``.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from reflex_actions.catalog.bootstrap import bootstrap_mcps
from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.cli.main import cli
from reflex_actions.demo.metadata import estate_mcps
from reflex_actions.handlers.lesson_store import LESSON_PREFIX, lesson_term_mcp
from reflex_actions.lessons.model import ApprovedVersion, LessonState
from tests.conftest import write_snapshot
from tests.handlers.builders import CONTROL, PAYMENTS, STEWARD, lesson

REPO = Path(__file__).resolve().parents[2]
DRAFTED = LESSON_PREFIX + "drafted"
PUBLISHED = LESSON_PREFIX + "published"
NO_LESSON = LESSON_PREFIX + "nope"
NO_DATASET = "urn:li:dataset:(urn:li:dataPlatform:snowflake,finance.nope,PROD)"
URL = "http://localhost:8080"
SPEC = "spec.yaml"
#: A few hundred bytes of YAML aliases that expand to 9^6 strings.
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcde", "bcdef", strict=True)
)
PIPELINE = "name: bad-inputs\nsource: {{type: reflex-lite, config: {{store: {store}}}}}\n" + (
    "action: {{type: reflex, config: {{store: {store}}}}}\n"
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working folder: a store holding the demo estate, a drafted and a published lesson,
    and the files the cases name (a spec, a snapshot, README.md, bad YAML, pipelines)."""
    root = tmp_path_factory.mktemp("bad-inputs")
    published = lesson(
        urn=PUBLISHED,
        state=LessonState.PUBLISHED,
        published_scope=[PAYMENTS],
        approved=ApprovedVersion(
            control=CONTROL,
            scope=[PAYMENTS],
            actor=STEWARD,
            at=1,
            digest=ApprovedVersion.digest_of(CONTROL, [PAYMENTS]),
        ),
    )
    catalog = LiteCatalog(root / "reflex.db")
    catalog.emit(
        [
            *bootstrap_mcps(),
            *estate_mcps(),
            lesson_term_mcp(lesson(urn=DRAFTED), "Drafted", STEWARD),
            lesson_term_mcp(published, "Published", STEWARD),
        ]
    )
    catalog.downstreams(PAYMENTS)  # the index brought up to date, as the first lookup would
    catalog.close()
    with closing(sqlite3.connect(root / "other.db")) as other:
        other.execute("CREATE TABLE notes (text TEXT)")  # SQLite, but no DataHub Lite store
    shutil.copy(REPO / "README.md", root / "README.md")
    shutil.copy(REPO / "reflex_actions" / "demo" / "estate.mcp.json", root / "estate.mcp.json")
    (root / SPEC).write_text("type: uniqueness\nfield: transaction_id\n")
    (root / "bomb.yaml").write_text(ALIAS_BOMB)
    (root / "broken.yaml").write_text("type: [uniqueness\n")
    (root / "bell.yaml").write_text("type: uniqueness\nfield: \x07\n")
    write_snapshot(root / "s.csv", [{"transaction_id": "T1"}])
    (root / "a-folder.csv").mkdir()  # a folder named like a file
    (root / "history").mkdir()
    (root / "notes").mkdir()
    (root / "notes" / "keep.txt").write_text("not a demo's folder")
    (root / "lessons").mkdir()
    (root / "lessons" / "bomb.yaml").write_text(ALIAS_BOMB)
    (root / "pipeline.yaml").write_text(PIPELINE.format(store="reflex.db"))
    (root / "gone-store.yaml").write_text(PIPELINE.format(store="gone/reflex.db"))
    return root


def tree(root: Path) -> dict[str, str]:
    """Every file and folder under ``root``: a folder as ``/``, a file as its content's hash."""
    return {
        str(path.relative_to(root)): "/"
        if path.is_dir()
        else hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
    }


@dataclass(frozen=True)
class Case:
    #: what the message must name
    says: str
    #: the command line after ``datahub-reflex``, split as a shell splits it
    line: str

    @property
    def args(self) -> list[str]:
        return shlex.split(self.line)

    def __str__(self) -> str:
        return self.line[:80]


def store_cases(command: str) -> list[Case]:
    """``command`` given each kind of bad ``--store``."""
    return [
        Case("nothere.db does not exist", f"{command} --store nothere.db"),
        Case("nodir/x.db does not exist", f"{command} --store nodir/x.db"),
        Case("cannot read README.md as SQLite", f"{command} --store README.md"),
        Case("other.db is not a DataHub Lite store", f"{command} --store other.db"),
        Case("is a folder, not a DataHub Lite file", f"{command} --store a-folder.csv"),
        Case("is a URL, not a DataHub Lite file", f"{command} --store {URL}"),
    ]


BACKTEST = f"backtest {SPEC} --history history"
RUN = f"control run {SPEC} --snapshot s.csv"
RESOLVE = "steward resolve-incident"
SET = "steward set-property"
CASES = [
    Case("nothere.yaml: No such file", "backtest nothere.yaml --history history"),
    Case("README.md", "backtest README.md --history history"),
    Case("anchor or alias", "backtest bomb.yaml --history history"),
    Case("not valid YAML", "backtest broken.yaml --history history"),
    Case("README.md is a file, not a history folder", f"backtest {SPEC} --history README.md"),
    Case("history folder not found", f"backtest {SPEC} --history nothere"),
    Case("not a size like 768MB", f"{BACKTEST} --memory-limit lots"),
    Case("not between 64MB", f"{BACKTEST} --memory-limit 1KB"),
    Case("--sample-size", f"{BACKTEST} --sample-size -1"),
    Case("--min-recall", f"{BACKTEST} --min-recall 2"),
    Case("r.html", f"{BACKTEST} --report nodir/r.html"),
    Case("a-folder.csv", f"{BACKTEST} --report a-folder.csv"),
    Case("column name ''", f"backtest {SPEC} --table s.csv --partition-column ''"),
    Case("references no dataset", f"{BACKTEST} --reference-table shop.customers"),
    Case("name two parents", f"{BACKTEST} --reference-table t --reference-history history"),
    Case("nothere.yaml: No such file", "control compile nothere.yaml"),
    Case("README.md", "control compile README.md"),
    Case("a-folder.csv", "control compile a-folder.csv"),
    Case("anchor or alias", "control compile bomb.yaml"),
    Case("unacceptable character", "control compile bell.yaml"),
    Case("not valid YAML", "control compile broken.yaml"),
    Case("--dialect", f"control compile {SPEC} --dialect nosuch"),
    Case("give it with --table", f"control compile {SPEC} --dialect postgres"),
    Case("anchor or alias", "control run bomb.yaml --snapshot s.csv"),
    Case("is a folder, not a snapshot file", f"control run {SPEC} --snapshot a-folder.csv"),
    Case("snapshot not found: nothere.csv", f"control run {SPEC} --snapshot nothere.csv"),
    Case("unsupported snapshot format '.md'", f"control run {SPEC} --snapshot README.md"),
    Case("column name ''", f"{RUN} --partition-column '' --partition x"),
    Case("--sample-size", f"{RUN} --sample-size -1"),
    Case("--baseline-counts", f"{RUN} --baseline-counts a,b"),
    Case("garbage", f"{RUN} --as-of garbage"),
    Case("README.md", "demo --dir README.md"),
    Case("holds no earlier demo", "demo --dir notes"),
    Case("unknown scenario 'nosuch'", "demo --scenario nosuch"),
    Case("no folder 'nothere'", "diff nothere"),
    Case("README.md", "diff README.md"),
    Case("anchor or alias", "diff lessons"),
    *store_cases("diff lessons"),
    Case("README.md", "export README.md"),
    *store_cases("export out"),
    Case("no folder 'nothere'", "propose nothere --as alice"),
    Case("anchor or alias", "propose lessons --as alice"),
    Case("--as", "propose lessons"),
    *store_cases("propose lessons --as alice"),
    Case("nothere.yaml: No such file", "evaluate --due -c nothere.yaml"),
    Case("README.md is not valid YAML", "evaluate --due -c README.md"),
    Case("anchor or alias", "evaluate --due -c bomb.yaml"),
    Case("lots", "evaluate --due -c pipeline.yaml --interval lots"),
    Case("garbage", "evaluate --due -c pipeline.yaml --interval 1h --as-of garbage"),
    Case("gone/reflex.db does not exist", "evaluate --due -c gone-store.yaml --interval 1h"),
    Case("(DataHub at http://localhost:1): Connection refused", "init --gms http://localhost:1"),
    *store_cases("init")[2:],  # a new store is what init makes (even a new SQLite's)
    Case("nothere.json", "load nothere.json"),
    Case("cannot read metadata file README.md", "load README.md --store new.db"),
    Case("a-folder.csv", "load a-folder.csv"),
    Case("is a URL", f"load estate.mcp.json --store {URL}"),
    *store_cases("lessons list"),
    Case(f"no lesson '{NO_LESSON}'", f"lessons show {NO_LESSON}"),
    Case("no lesson ''", "lessons show ''"),
    Case("does not exist", f"lessons show {DRAFTED} --store nothere.db"),
    *store_cases("site out"),
    Case("the site folder 'README.md' is a file", "site README.md"),
    *store_cases("status"),
    Case("nothere.yaml: No such file", "status -c nothere.yaml"),
    Case("README.md is not valid YAML", "status -c README.md"),
    Case("anchor or alias", "status -c bomb.yaml"),
    Case("not both", "status -c pipeline.yaml --store reflex.db"),
    Case("not a dataset urn: 'not-an-urn'", "steward land not-an-urn --partition p"),
    Case("finance.nope,PROD)' in the store", f"steward land {NO_DATASET} --partition p"),
    Case("is a folder, not a snapshot file", f"steward land {PAYMENTS} --snapshot a-folder.csv"),
    Case("partition '' must be 1 to 200", f"steward land {PAYMENTS} --partition ''"),
    *store_cases(f"steward land {PAYMENTS} --partition p"),
    Case("no incident 'urn:li:incident:nope'", f"{RESOLVE} urn:li:incident:nope --note n --as a"),
    Case("no incident '' in the store", f"{RESOLVE} '' --note n --as alice"),
    *store_cases(f"{RESOLVE} urn:li:incident:x --note n --as alice"),
    Case(f"no lesson '{NO_LESSON}'", f"steward retire {NO_LESSON} --as alice"),
    Case("is PROPOSED, not published", f"steward retire {DRAFTED} --as alice"),
    Case("not a lesson (glossary term) urn: 'x'", "steward retire x --as alice"),
    *store_cases(f"steward retire {PUBLISHED} --as alice"),
    Case("no approved version 2: choose 1 to 1", f"steward rollback {PUBLISHED} --to 2 --as a"),
    Case("'--to'", f"steward rollback {PUBLISHED} --to two --as alice"),
    Case(f"no lesson '{NO_LESSON}'", f"steward rollback {NO_LESSON} --to 1 --as alice"),
    Case("not an urn: 'not-an-urn'", f"{SET} not-an-urn reflex.approval APPROVED --as alice"),
    Case("should be one of 'PENDING', 'APPROVED'", f"{SET} {DRAFTED} reflex.approval MAYBE --as a"),
    Case("no Reflex structured property", f"{SET} {DRAFTED} reflex.nosuchprop x --as alice"),
    Case(f"no lesson '{NO_LESSON}'", f"{SET} {NO_LESSON} reflex.approval APPROVED --as alice"),
    Case("applies to glossaryTerm entities", f"{SET} {PAYMENTS} reflex.approval APPROVED --as a"),
    Case("has cardinality 1", f"{SET} {DRAFTED} reflex.approval APPROVED PENDING --as alice"),
    Case("should be a number", f"{SET} {PUBLISHED} reflex.version two --as alice"),
    Case("not an urn: ''", f"{SET} '' reflex.approval APPROVED --as alice"),
    *store_cases(f"{SET} {DRAFTED} reflex.approval APPROVED --as alice"),
    Case("no user 'urn:li:corpuser:nobody'", "steward suspend-user nobody --as henry"),
    Case("not a user urn: 'urn:li:corpGroup:x'", "steward suspend-user urn:li:corpGroup:x --as h"),
    Case("not a user urn: ''", "steward suspend-user '' --as henry"),
    *store_cases("steward suspend-user dave --as henry"),
]


def leaf_commands(group: click.Group = cli, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """The command paths the CLI registers (``steward land``), down to each command."""
    ctx = click.Context(group)
    found: set[tuple[str, ...]] = set()
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            found |= leaf_commands(command, (*prefix, name))
        else:
            found.add((*prefix, name))
    return found


def command_of(args: list[str]) -> tuple[str, ...]:
    """The command path the arguments start with (as far as they name groups and commands)."""
    command: click.Command = cli
    path: list[str] = []
    for word in args:
        if not isinstance(command, click.Group):
            break
        found = command.get_command(click.Context(command), word)
        if found is None:
            break
        command = found
        path.append(word)
    return tuple(path)


def test_every_command_has_bad_input_cases() -> None:
    assert {command_of(c.args) for c in CASES} == leaf_commands()


@pytest.mark.parametrize("bad", CASES, ids=str)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    bad: Case, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workdir)
    monkeypatch.delenv("REFLEX_STORE", raising=False)
    before = tree(workdir)

    result = CliRunner().invoke(cli, bad.args)

    assert (result.exit_code, result.stdout) == (2, ""), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and bad.says in line
    assert len(line) < 600
    assert tree(workdir) == before


#: Through a real process: what reaches the terminal (the SDK's logging included).
IN_A_PROCESS = [
    Case("cannot read README.md as SQLite", "lessons --store README.md"),
    Case("cannot connect (DataHub at http://localhost:1)", "init --gms http://localhost:1"),
    Case("not a size like 768MB", f"{BACKTEST} --memory-limit lots"),
    Case("not an urn: 'not-an-urn'", f"{SET} not-an-urn reflex.approval APPROVED --as alice"),
]


def test_no_traceback_reaches_the_terminal(workdir: Path) -> None:
    before = tree(workdir)
    program = "from reflex_actions.cli.main import cli; cli(prog_name='datahub-reflex')"
    env = {k: v for k, v in os.environ.items() if k != "REFLEX_STORE"} | {"PYTHONPATH": str(REPO)}
    running = [
        subprocess.Popen(
            [sys.executable, "-c", program, *bad.args],
            cwd=workdir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for bad in IN_A_PROCESS
    ]
    for bad, process in zip(IN_A_PROCESS, running, strict=True):
        stdout, stderr = process.communicate(timeout=120)
        assert (process.returncode, stdout) == (2, ""), stderr
        (line,) = stderr.splitlines()
        assert line.startswith("error: ") and bad.says in line
    assert tree(workdir) == before
