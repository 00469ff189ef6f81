"""Where a dataset's history is, and the engines reading tables: a history folder named by
the urn (``config.dataset_folder``, as the landing locator names it), a table's partitions on
its platform's engine, an Iceberg table's snapshots or a Delta table's versions. Histories are
read for drafting, backtests and volume baselines; each engine is opened once and kept for
the action's lifetime."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from datahub.metadata.schema_classes import DataPlatformInstanceClass
from datahub.metadata.urns import DataPlatformInstanceUrn
from datahub.utilities.urns.error import InvalidUrnError

from reflex_actions.backtest.history import (
    LABELS_FILE,
    History,
    HistoryError,
    delta_history,
    iceberg_history,
    load_history,
    partition_history,
    unreadable_history,
)
from reflex_actions.catalog.base import Catalog
from reflex_actions.config import ReflexConfig, dataset_folder
from reflex_actions.controls import Control
from reflex_actions.engines import open_engine
from reflex_actions.engines.base import DeltaTarget, Engine, IcebergTarget, TableTarget
from reflex_actions.errors import ReflexError
from reflex_actions.vocabulary import dataset_platform, display_name

logger = logging.getLogger(__name__)

#: DataHub's platform names (its data_platforms list) of the lakehouse tables whose commits are
#: a dataset's history: Iceberg snapshots, Delta versions
ICEBERG_PLATFORM, DELTA_PLATFORM = "iceberg", "delta-lake"


@dataclass
class Histories:
    """Each dataset's history and table, as the configuration places them."""

    catalog: Catalog
    config: ReflexConfig
    #: the engines opened for the platforms configured under ``engines`` (by their index
    #: there), kept open for the action's lifetime
    engines: dict[int, Engine] = field(default_factory=dict, repr=False)

    def history_folder(self, dataset_urn: str) -> Path | None:
        """The dataset's history folder (``histories.folder`` named by :func:`dataset_folder`,
        as the landing locator is); None without a histories root, or when the urn's name would
        lead outside it."""
        root = self.config.histories.root
        if root is None:
            return None
        relative = dataset_folder(self.config.histories.folder, dataset_urn)
        if relative is None:
            logger.warning("no history for %s: it is not a dataset urn", dataset_urn)
            return None
        folder = (root / relative).resolve()
        if not folder.is_relative_to(root.resolve()):
            logger.warning("no history for %s: its name leads outside %s", dataset_urn, root)
            return None
        return folder

    def table_of(
        self, dataset_urn: str, partition: str | None = None
    ) -> tuple[Engine, TableTarget] | None:
        """Where the dataset's rows are read when its platform has an engine: its table (the
        urn's name), or the partition holding ``partition`` when ``histories.partition_column``
        names the column; None without an engine. Raise EngineError when it cannot connect."""
        found = self.config.engine_for(dataset_platform(dataset_urn), display_name(dataset_urn))
        if found is None:
            return None
        config, table = found
        index = self.config.engines.index(config)
        if index not in self.engines:
            self.engines[index] = open_engine(config.engine, config.connection or None)
        column = self.config.histories.partition_column if partition is not None else None
        return self.engines[index], TableTarget(table, column, partition if column else None)

    def history_for(self, dataset_urn: str) -> History | None:
        """The dataset's snapshot history, if the configured histories root has one; it is
        named by the urn's name, as the report lists it."""
        folder = self.history_folder(dataset_urn)
        if folder is None or not folder.is_dir():
            return None
        try:
            return load_history(folder, dataset=display_name(dataset_urn))
        except HistoryError as error:
            logger.warning("ignoring the history of %s: %s", dataset_urn, error)
            return None

    def backtest_history(self, dataset_urn: str) -> tuple[History, Engine | None] | None:
        """The history a backtest judges the dataset on, and the engine reading its points
        (None: the embedded DuckDB, for a folder's files).

        A history folder holding snapshot files wins: it is the history laid out for this
        dataset, the one drafting and landing read too. Otherwise, for an Iceberg or Delta
        dataset it is its table's commits (:meth:`lakehouse_history`); on a platform with an
        engine and with ``histories.partition_column`` set, the partitions of the dataset's
        table (:meth:`table_history`); otherwise the folder as it is (None without one)."""
        folder = self.history_for(dataset_urn)
        if folder is not None and folder.snapshots:
            return folder, None
        lakehouse = self.lakehouse_history(dataset_urn)
        if lakehouse is not None:
            return lakehouse, None
        on_table = self.table_history(dataset_urn)
        if on_table is not None:
            return on_table
        return (folder, None) if folder is not None else None

    def table_history(self, dataset_urn: str) -> tuple[History, Engine | None] | None:
        """The partitions of the dataset's table (one point per value of
        ``histories.partition_column``), listed on its platform's engine, and that engine;
        labelled by the ``labels.yaml`` of the dataset's history folder, when it has one (the
        folder then holds its labels alone). None without a partition column or an engine. A
        table that cannot be listed (its engine unreachable, the table or column missing)
        gives a history with no points saying why: that dataset is not evaluable, never an
        error stopping the others."""
        column = self.config.histories.partition_column
        if column is None:
            return None
        name = display_name(dataset_urn)
        try:
            on_table = self.table_of(dataset_urn)
            if on_table is None:
                return None
            engine, table = on_table
            labels = self._labels_file(dataset_urn)
            return partition_history(engine, table, column, dataset=name, labels=labels), engine
        except ReflexError as error:
            logger.warning("the table history of %s cannot be read: %s", dataset_urn, error)
            reason = f"not evaluable: its table's partitions cannot be listed: {error}"
            return unreadable_history(name, f"{name} partitioned by {column}", reason), None

    def reference_histories(
        self, control: Control, engines: Iterable[Engine | None]
    ) -> dict[Engine | None, dict[str, History]]:
        """The history of the dataset ``control`` references (by its urn), for the children
        each of ``engines`` reads, as landing pairs them: a table's partitions are checked
        against the referenced dataset's table on the same engine (:meth:`table_history`; one
        query reads both), a folder's files (engine None) against its history folder. An
        engine with no parent there gets the folder too, whose files it cannot read: its
        children are then not evaluable, saying so."""
        referenced = control.referenced()
        if referenced is None:
            return {}
        folder = self.history_for(referenced.dataset)
        readers = set(engines)
        on_table = self.table_history(referenced.dataset) if readers - {None} else None
        by_engine: dict[Engine | None, dict[str, History]] = {}
        for engine in readers:
            parent = folder
            if engine is not None and on_table is not None:
                table, reading = on_table
                if reading is engine or table.unreadable:
                    parent = table
            if parent is not None:
                by_engine[engine] = {referenced.dataset: parent}
        return by_engine

    def lakehouse_history(self, dataset_urn: str) -> History | None:
        """The commits of the dataset's lakehouse table, read by the embedded engine: for the
        ``iceberg`` platform the snapshots of the table named by the urn's name
        (``namespace.table``) in ``histories.iceberg_catalog``, for ``delta-lake`` the versions
        of the table at ``histories.delta_root / <the urn's name>``; labelled as
        :meth:`table_history` labels. None on another platform, without that setting, or when
        the name leads outside the Delta root. A table that cannot be read gives a history
        with no points saying why (its dataset not evaluable, the others still judged)."""
        target = self.lakehouse_table(dataset_urn)
        if target is None:
            return None
        name = display_name(dataset_urn)
        labels = self._labels_file(dataset_urn)
        try:
            if isinstance(target, IcebergTarget):
                return iceberg_history(target.catalog, target.table, dataset=name, labels=labels)
            return delta_history(target.path, dataset=name, labels=labels)
        except ReflexError as error:
            logger.warning("the table history of %s cannot be read: %s", dataset_urn, error)
            reason = f"not evaluable: its table's history cannot be read: {error}"
            return unreadable_history(name, target.shown, reason)

    def lakehouse_table(self, dataset_urn: str) -> IcebergTarget | DeltaTarget | None:
        """The dataset's Iceberg or Delta table (all its commits), as configured under
        ``histories``; None when it has none there."""
        platform, name = dataset_platform(dataset_urn), self._name_in_instance(dataset_urn)
        histories = self.config.histories
        if platform == ICEBERG_PLATFORM and histories.iceberg_catalog is not None:
            return IcebergTarget(histories.iceberg_catalog, name)
        if platform != DELTA_PLATFORM or histories.delta_root is None:
            return None
        table = histories.delta_table(name)
        if table is None:
            logger.warning("no history for %s: its name leads outside delta_root", dataset_urn)
            return None
        return DeltaTarget(table)

    def _name_in_instance(self, dataset_urn: str) -> str:
        """The urn's name less its platform instance's prefix, as DataHub's sources prefix an
        instance's datasets (``prod.finance.payments`` of the instance ``prod`` is the table
        ``finance.payments``); the name itself when no instance is recorded for it."""
        name = display_name(dataset_urn)
        recorded = self.catalog.get_aspect(dataset_urn, DataPlatformInstanceClass)
        if recorded is None or not recorded.instance:
            return name
        try:
            prefix = DataPlatformInstanceUrn.from_string(recorded.instance).instance + "."
        except InvalidUrnError:
            logger.warning("%s: its platform instance is not an urn; name kept", dataset_urn)
            return name
        return name[len(prefix) :] if name.startswith(prefix) else name

    def _labels_file(self, dataset_urn: str) -> Path | None:
        """The ``labels.yaml`` of the dataset's history folder, when it has one: a table's
        history is labelled by it (the folder then holds its labels alone)."""
        folder = self.history_folder(dataset_urn)
        labels = folder / LABELS_FILE if folder is not None else None
        return labels if labels is not None and labels.is_file() else None

    def estate_history(self, folder: str) -> History | None:
        """An estate-wide history (one folder under the histories root for all datasets, e.g.
        ownership snapshots), if present."""
        root = self.config.histories.root
        if root is None or not (root / folder).is_dir():
            return None
        try:
            return load_history(root / folder, dataset=f"{folder} (all datasets)")
        except HistoryError as error:
            logger.warning("ignoring the %s history: %s", folder, error)
            return None
