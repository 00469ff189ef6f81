"""A control compiled against a relation and rendered in an engine's dialect, kept for reuse.

A backtest judges hundreds of snapshots of one shape (only the bound file differs), and
compiling and rendering costs ~2 ms a time (a third of a 100k-row snapshot's query): each is
rendered once per process. ``datahub-reflex control run`` is a process per run, and compiling
needs sqlglot, ~100 ms to import (a third of the command's start-up): the CLI also keeps what
it rendered on disk (:class:`RenderedStore`), so running a control again on a snapshot of the
same shape reads its SQL back and never imports sqlglot.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reflex_actions.safe_files import Folder, UnsafePathError
from reflex_actions.sql import ControlQuery, Relation

if TYPE_CHECKING:
    from reflex_actions.controls import Control
    from reflex_actions.sql import exp


@dataclass(frozen=True)
class RenderedQuery:
    """A query rendered in a dialect, and the names of the values it binds."""

    sql: str
    names: frozenset[str]

    def bind(self, relation: Relation, params: Mapping[str, Any]) -> dict[str, Any]:
        """The values this query names, from the relation (and its parent) and the control."""
        parent = relation.reference.params if relation.reference is not None else {}
        bound = {**parent, **relation.params, **params}
        return {name: bound[name] for name in self.names}


@dataclass(frozen=True)
class RenderedControl:
    """What an engine runs of a compiled control: its counts, its sample (run only when the
    counts fail), the control's own bound values, and how the sample reads (``ControlQuery``)."""

    counts: RenderedQuery
    sample: RenderedQuery | None
    params: Mapping[str, Any]
    sample_is_measures: bool = False
    sample_counted: bool = False
    sample_totals: bool = False
    #: the counts row from what the reader knows without reading the rows, or no row: then
    #: ``counts`` runs (``ControlQuery.settled``)
    settled: RenderedQuery | None = None


#: The row of bound values a batched query reads in place of its parameters.
BATCH_ROW = "reflex_batch"


@dataclass(frozen=True)
class BatchedCounts:
    """A counts query run for many relations of one shape in one query: each relation's bound
    values one row of a ``VALUES`` list, joined laterally to the query. A sweep judges a slice
    of datasets on recorded facts this way: planning a query costs ~1-2 ms, almost all of
    what one on recorded facts costs, and is paid once for the slice, not once a dataset."""

    #: the counts query reading the ``BATCH_ROW`` row's columns in place of its parameters
    lateral: str
    names: tuple[str, ...]
    #: whether it reads a table (the sources it does not read are left out): one that reads
    #: none (a count a footer or DataHub gave, bound) judges any number of relations at once
    reads_tables: bool = True

    def sql(self, rows: int) -> str:
        """The query over ``rows`` rows of bound values, its result rows in their order, each
        led by its row's index."""
        columns = ", ".join(["reflex_item", *(f'"p_{name}"' for name in self.names)])
        values = ", ".join(
            "(" + ", ".join(f"$b{i}_{name}" for name in ("item", *self.names)) + ")"
            for i in range(rows)
        )
        return (
            f"SELECT {BATCH_ROW}.reflex_item, judged.* FROM (VALUES {values}) AS "
            f"{BATCH_ROW}({columns}), LATERAL ({self.lateral}) AS judged "
            f"ORDER BY {BATCH_ROW}.reflex_item"
        )

    def bind(self, bound: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The values of the rows: ``bound`` holds each relation's, as its query binds them."""
        values: dict[str, Any] = {}
        for i, each in enumerate(bound):
            values[f"b{i}_item"] = i
            values.update((f"b{i}_{name}", each[name]) for name in self.names)
        return values


_BATCHED: dict[tuple[str, str], BatchedCounts] = {}


def batched(counts: RenderedQuery, dialect: str) -> BatchedCounts:
    """``counts`` reading its values from a batch's row (see :class:`BatchedCounts`)."""
    key = (counts.sql, dialect)
    found = _BATCHED.get(key)
    if found is None:
        from reflex_actions.sql import exp, parse

        tree = _without_unread_sources(parse(counts.sql, dialect))
        names = tuple(sorted({node.name for node in tree.find_all(exp.Placeholder)} & counts.names))
        if not all(name.isidentifier() for name in names):
            raise ValueError(f"a query binds a value under an odd name: {names}")

        def read_from_row(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Placeholder) and node.name in counts.names:
                return exp.column(f"p_{node.name}", table=BATCH_ROW, quoted=True)
            return node

        reads_tables = any(True for _ in tree.find_all(exp.Table))
        tree = tree.transform(read_from_row)
        found = BatchedCounts(tree.sql(dialect=dialect), names, reads_tables)
        with _RENDERED_LOCK:
            if len(_BATCHED) >= MAX_RENDERED:
                _BATCHED.clear()
            _BATCHED[key] = found
    return found


def _without_unread_sources(tree: exp.Expression) -> exp.Expression:
    """``tree`` without the common table expressions it never reads (a count bound in place
    of the snapshot's leaves its source unread)."""
    from reflex_actions.sql import exp

    own = tree.args.get("with_")
    if own is None:
        return tree
    ctes = {cte.alias_or_name: cte for cte in own.expressions}
    body = tree.copy()
    body.set("with_", None)
    read = {table.name for table in body.find_all(exp.Table)}
    pending = list(read & ctes.keys())
    while pending:
        for table in ctes[pending.pop()].find_all(exp.Table):
            if table.name in ctes and table.name not in read:
                read.add(table.name)
                pending.append(table.name)
    kept = [cte for name, cte in ctes.items() if name in read]
    if len(kept) == len(ctes):
        return tree
    tree.set("with_", exp.With(expressions=kept) if kept else None)
    return tree


#: Rendered controls by control, dialect and the shape of what they read.
_RENDERED: dict[tuple[Any, ...], RenderedControl] = {}
_RENDERED_LOCK = threading.Lock()
MAX_RENDERED = 512


def rendered(
    control: Control, relation: Relation, sample_size: int, dialect: str
) -> RenderedControl:
    """``control`` compiled against ``relation`` and its queries rendered in ``dialect``:
    once per shape of relation (everything but its bound values, on which a compiled control
    never depends), read from the CLI's store when it rendered that shape before."""
    shape = _shape(relation, dialect)
    key = (type(control), control.model_dump_json(), sample_size, dialect, shape)
    with _RENDERED_LOCK:
        found = _RENDERED.get(key)
    if found is not None:
        return _bound_anew(found, control, relation)
    store = _STORE[0]
    digest = store.digest(key, type(control)) if store is not None else ""
    found = store.get(digest) if store is not None else None
    if found is None:
        found = _compiled(control, relation, sample_size, dialect)
        if store is not None:
            store.put(digest, found)
    with _RENDERED_LOCK:
        if len(_RENDERED) >= MAX_RENDERED:
            _RENDERED.clear()
        _RENDERED[key] = found
    return _bound_anew(found, control, relation)


def _bound_anew(found: RenderedControl, control: Control, relation: Relation) -> RenderedControl:
    """A control rendered for the relation's shape, with the values it binds from this
    relation (``Control.bound_from``)."""
    bound = control.bound_from(relation)
    return replace(found, params={**found.params, **bound}) if bound else found


def _compiled(
    control: Control, relation: Relation, sample_size: int, dialect: str
) -> RenderedControl:
    query = control.compile(relation, sample_size)
    return RenderedControl(
        counts=_rendered(query.counts, relation, query, dialect),
        sample=None if query.sample is None else _rendered(query.sample, relation, query, dialect),
        params=dict(query.params),
        sample_is_measures=query.sample_is_measures,
        sample_counted=query.sample_counted,
        sample_totals=query.sample_totals,
        settled=None
        if query.settled is None
        else _rendered(query.settled, relation, query, dialect),
    )


def _rendered(
    tree: exp.Query, relation: Relation, query: ControlQuery, dialect: str
) -> RenderedQuery:
    sql, bound = query.render(tree, relation, dialect)
    return RenderedQuery(sql, frozenset(bound))


def _shape(relation: Relation, dialect: str) -> tuple[Any, ...]:
    """What a compiled control may depend on: the relation but its bound values, and of what
    is known of it (its time, earlier counts, recorded facts) only which parts are known and
    the recorded columns; the rest a control binds anew (``Control.bound_from``)."""
    source, recorded = relation.source, relation.recorded
    return (
        source if isinstance(source, str) else source.sql(dialect=dialect),
        tuple(sorted(relation.types.items())),
        relation.earlier_counts is not None,
        relation.text_only,
        relation.filters_see_nans,
        relation.as_of_ms is not None,
        None
        if recorded is None
        else (recorded.row_count is None, recorded.last_updated_ms is None, recorded.columns),
        relation.row_count_is_free,
        relation.footer_rows is not None,
        None if relation.reference is None else _shape(relation.reference, dialect),
    )


#: The store rendered controls are kept in between processes (None: kept in memory only).
_STORE: list[RenderedStore | None] = [None]
#: The layout of a stored entry: a change of it makes every older entry a miss.
STORE_FORMAT = 3
#: The largest entry read back (a control's two queries are a few kilobytes).
MAX_ENTRY_BYTES = 1 << 20


@contextmanager
def keeping_rendered_in(store: RenderedStore | None) -> Iterator[None]:
    """Within the block, keep what is rendered in ``store`` too, and read it there first."""
    before, _STORE[0] = _STORE[0], store
    try:
        yield
    finally:
        _STORE[0] = before


@dataclass(frozen=True)
class RenderedStore:
    """Rendered controls on disk, one small JSON file each, named by the digest of everything
    the SQL may depend on: the control, sample size, dialect and relation's shape, and the
    code that rendered it (this package's and the control's modules, by size and modification
    time as Python's bytecode cache checks a module, and sqlglot's installed files), so an
    upgrade or an edit renders anew.

    Its SQL runs, so the folder must be the user's own: created private, and a folder that
    someone else owns or may write to is never read or written. A file that is not a
    well-formed entry is a miss, rendered anew and replaced; only controls whose bound values
    JSON gives back unchanged are kept; at most ``max_entries`` files, the oldest removed.
    """

    folder: Path
    max_entries: int = 256

    @classmethod
    def default(cls, environ: Mapping[str, str] | None = None) -> RenderedStore | None:
        """``$REFLEX_CACHE_DIR/rendered`` (set empty: no store), else the user's cache folder
        (``$XDG_CACHE_HOME``, else ``~/.cache``) ``/datahub-reflex/rendered``; None when the
        user has no home folder."""
        values = os.environ if environ is None else environ
        configured = values.get("REFLEX_CACHE_DIR")
        if configured is not None:
            return cls(Path(configured) / "rendered") if configured else None
        base = values.get("XDG_CACHE_HOME")
        if not base:
            try:
                base = str(Path.home() / ".cache")
            except RuntimeError:  # no home folder to keep a cache in: none is kept
                return None
        return cls(Path(base) / "datahub-reflex" / "rendered")

    def digest(self, key: tuple[Any, ...], control: type[Control]) -> str:
        module = sys.modules.get(control.__module__)
        text = repr((STORE_FORMAT, _code_version(getattr(module, "__file__", None)), key))
        return hashlib.sha256(text.encode()).hexdigest()

    def get(self, digest: str) -> RenderedControl | None:
        if not self._private():
            return None
        try:
            with (self.folder / f"{digest}.json").open("rb") as handle:
                data = handle.read(MAX_ENTRY_BYTES + 1)
            if len(data) > MAX_ENTRY_BYTES:
                return None
            return _entry(json.loads(data.decode("utf-8")))
        except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError):
            return None

    def put(self, digest: str, found: RenderedControl) -> None:
        text = json.dumps(_as_json(found), sort_keys=True) if _exact_json(found.params) else ""
        if not text or len(text.encode()) > MAX_ENTRY_BYTES:
            return
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not self._private():
                return
            with Folder(self.folder) as folder:
                folder.write_file(f"{digest}.json", text)
                self._prune(folder)
        except (OSError, UnsafePathError):
            return  # a store that cannot be written is only slower: the run goes on

    def _private(self) -> bool:
        """Whether the folder is the user's alone (owned by them, writable by no one else)."""
        try:
            status = self.folder.stat()
        except OSError:
            return False
        owned = not hasattr(os, "getuid") or status.st_uid == os.getuid()
        return owned and not status.st_mode & 0o022

    def _prune(self, folder: Folder) -> None:
        entries = sorted(
            (status.st_mtime_ns, name)
            for name, status in folder.regular_files().items()
            if name.endswith(".json")
        )
        for _, stale in entries[: max(0, len(entries) - self.max_entries)]:
            folder.remove_file(stale)


@cache
def _code_version(control_file: str | None) -> tuple[Any, ...]:
    """Size and modification time of every module that renders a control: this package's,
    the control's own (a plugin's may live elsewhere) and sqlglot's."""
    sqlglot = importlib.util.find_spec("sqlglot")
    folders = [Path(__file__).resolve().parents[1]]
    if sqlglot is not None and sqlglot.origin is not None:
        folders.append(Path(sqlglot.origin).parent)
    stats = [_stat(Path(control_file))] if control_file is not None else []
    for folder in folders:
        for directory, subfolders, files in os.walk(folder):
            subfolders[:] = sorted(name for name in subfolders if name != "__pycache__")
            stats += [_stat(Path(directory, name)) for name in sorted(files) if name[-3:] == ".py"]
    return tuple(stats)


def _stat(path: Path) -> tuple[str, int, int]:
    try:
        status = path.stat()
    except OSError:
        return (str(path), -1, -1)
    return (str(path), status.st_size, status.st_mtime_ns)


def _as_json(found: RenderedControl) -> dict[str, Any]:
    def query(rendered_query: RenderedQuery | None) -> dict[str, Any] | None:
        if rendered_query is None:
            return None
        return {"sql": rendered_query.sql, "names": sorted(rendered_query.names)}

    return {
        "format": STORE_FORMAT,
        "counts": query(found.counts),
        "sample": query(found.sample),
        "params": dict(found.params),
        "sample_is_measures": found.sample_is_measures,
        "sample_counted": found.sample_counted,
        "sample_totals": found.sample_totals,
        "settled": query(found.settled),
    }


def _entry(data: Any) -> RenderedControl | None:
    """A stored entry read back, or None when it is not one this version wrote."""

    def query(value: Any) -> RenderedQuery:
        if not (isinstance(value["sql"], str) and isinstance(value["names"], list)):
            raise TypeError("not a rendered query")
        if not all(isinstance(name, str) for name in value["names"]):
            raise TypeError("not a rendered query")
        return RenderedQuery(value["sql"], frozenset(value["names"]))

    flags = (data["sample_is_measures"], data["sample_counted"], data["sample_totals"])
    if data["format"] != STORE_FORMAT or not all(isinstance(flag, bool) for flag in flags):
        return None
    if not isinstance(data["params"], dict):
        return None
    return RenderedControl(
        counts=query(data["counts"]),
        sample=None if data["sample"] is None else query(data["sample"]),
        params=data["params"],
        sample_is_measures=flags[0],
        sample_counted=flags[1],
        sample_totals=flags[2],
        settled=None if data["settled"] is None else query(data["settled"]),
    )


def _exact_json(value: Any) -> bool:
    """Whether JSON gives ``value`` back as it is (same types, same values)."""
    kind = type(value)
    if value is None or kind in (str, bool, int):
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is list:
        return all(_exact_json(item) for item in value)
    if kind is dict:
        return all(type(k) is str and _exact_json(v) for k, v in value.items())
    return False
