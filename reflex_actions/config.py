"""The `reflex` action's configuration (the `action.config` block of the actions YAML); plain
pydantic, read by the handlers and the action alike."""

from __future__ import annotations

import posixpath
import re
import string
from pathlib import Path

from datahub.utilities.urns.dataset_urn import DatasetUrn
from datahub.utilities.urns.error import InvalidUrnError
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from reflex_actions.backtest.engine import (
    DEFAULT_MEMORY_LIMIT,
    DEFAULT_SAMPLE_SIZE,
    validate_memory_limit,
)
from reflex_actions.bounded import safe_excerpt
from reflex_actions.controls.base import validate_column_name
from reflex_actions.lessons.llm import LlmConfig
from reflex_actions.similarity.config import SimilarityConfig
from reflex_actions.times import parse_duration

#: the actor GMS records for system-client and (with metadata-service auth off) tokenless writes
DATAHUB_SYSTEM_ACTOR = "urn:li:corpuser:__datahub_system"
ENVIRONMENT_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


#: The object stores deltalake reads a table from (besides a local folder).
DELTA_SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "file")


class _Strict(BaseModel):
    #: a mistyped secret (a connection URL in place of a variable's name, a key) is never
    #: echoed back in an error: the parent's setting decides for the models nested in it
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)


class ApproversConfig(_Strict):
    """Who may pass the human gates (besides the owners of the lesson's glossary term)."""

    users: list[str] = Field(
        default_factory=list, description="User urns that may pass the human gates."
    )
    groups: list[str] = Field(
        default_factory=list,
        description="Group urns whose members may pass the human gates (memberships someone "
        "else wrote).",
    )


def dataset_folder(template: str, dataset_urn: str, **fields: str) -> str | None:
    """The one mapping from a dataset to the path a template names for it (``histories.folder``,
    ``landing.locator``): ``{name}`` is the dataset urn's name
    (``payments.public.card_settlements``, never the shorter ``datasetProperties.name``, which
    collides across schemas and platforms) and ``{platform}`` the urn's platform; ``fields``
    fill the others (``{snapshot_id}``). None when the urn is no dataset's."""
    try:
        urn = DatasetUrn.from_string(dataset_urn)
    except InvalidUrnError:
        return None
    platform = urn.get_data_platform_urn().platform_name
    return template.format(name=urn.name, platform=platform, **fields)


#: What ``dataset_folder`` fills in a history folder's template, and in a landing locator's.
FOLDER_FIELDS = ("name", "platform")
LOCATOR_FIELDS = (*FOLDER_FIELDS, "snapshot_id")


def validate_template(template: str, fields: tuple[str, ...]) -> str:
    """``template`` when each of its ``{...}`` is one of ``fields``, plainly: refused at load,
    not at the first event it would fail (a typo) or the first it would let through (a
    ``{name.__class__}`` reaching into an object)."""
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as error:
        raise ValueError(f"{safe_excerpt(template)}: {error}") from None
    for _, field, spec, conversion in parts:
        if field is None:
            continue
        if field not in fields or spec or conversion:
            shown = ", ".join(f"{{{name}}}" for name in fields)
            raise ValueError(
                f"{safe_excerpt('{' + field + '}')} is not a field it fills: it fills {shown}, "
                "each as it is"
            )
    return template


class HistoriesConfig(_Strict):
    """Where each dataset's snapshot history lives: ``root / folder``, the folder named as
    :func:`dataset_folder` names it (``{platform}/{name}`` for a platform level). Datasets
    without a folder have no history."""

    root: Path | None = Field(
        default=None, description="The folder holding one history folder per dataset."
    )
    folder: str = Field(
        default="{name}",
        description="A dataset's history folder under the root: {name} is the urn's name, "
        "{platform} its platform.",
    )
    partition_column: str | None = Field(
        default=None,
        description="On a platform with an engine, the column whose values are a table's "
        "history points (a load date): an operation naming a partition evaluates its rows.",
    )
    iceberg_catalog: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="The pyiceberg catalog holding the tables of datasets on DataHub's "
        "iceberg platform (urn name namespace.table): their history is the table's snapshots.",
    )
    delta_root: str | None = Field(
        default=None,
        min_length=1,
        max_length=1000,
        description="Where the tables of datasets on DataHub's delta-lake platform are, each "
        "at delta_root/<urn name>: a local folder or an object store URI (s3://bucket/lake); "
        "their history is the table's versions.",
    )

    @field_validator("partition_column")
    @classmethod
    def _a_column(cls, value: str | None) -> str | None:
        return None if value is None else validate_column_name(value)

    @field_validator("folder")
    @classmethod
    def _a_folder_template(cls, value: str) -> str:
        return validate_template(value, FOLDER_FIELDS)

    @field_validator("delta_root", mode="before")
    @classmethod
    def _a_folder_or_uri(cls, value: object) -> object:
        if isinstance(value, Path):
            return str(value)
        if isinstance(value, str) and "://" in value:
            scheme = value.split("://", 1)[0]
            if scheme not in DELTA_SCHEMES:
                raise ValueError(
                    f"delta_root: {scheme[:20]!r} is no object store deltalake reads; "
                    f"one of {', '.join(DELTA_SCHEMES)}, or a local folder"
                )
        return value

    def delta_table(self, name: str) -> str | None:
        """Where the Delta table of the dataset named ``name`` is: ``delta_root/<name>``, a
        local folder (resolved) or a URI under the root's; None without a root, or when the
        name leads outside it."""
        if self.delta_root is None:
            return None
        scheme, separator, rest = self.delta_root.partition("://")
        if separator:
            root = rest.rstrip("/")
            joined = posixpath.normpath(f"{root}/{name}")
            return f"{scheme}://{joined}" if joined.startswith(root + "/") else None
        folder = Path(self.delta_root).resolve()
        table = (folder / name).resolve()
        return str(table) if table.is_relative_to(folder) and table != folder else None


class LandingConfig(_Strict):
    """Where a newly landed snapshot is, and where it may be.

    An operation names its snapshot in ``customProperties.snapshot`` (a path); otherwise the
    ``locator`` template is filled from the dataset urn as :func:`dataset_folder` fills a
    history folder (``{name}``, ``{platform}``) and from the operation (``{snapshot_id}`` =
    ``customProperties.snapshot_id``, else the partition). The
    resolved path must lie under one of ``allowed_roots``, or the snapshot is refused.
    """

    allowed_roots: list[Path] = Field(
        default_factory=list,
        description="Folders a landed snapshot may be read from; any other path is refused.",
    )
    locator: str | None = Field(
        default=None,
        description="Where a landed snapshot is when the operation names no path: {name}, "
        "{platform} and {snapshot_id} are filled (landing/{name}/{snapshot_id}.parquet).",
    )

    @field_validator("locator")
    @classmethod
    def _a_locator_template(cls, value: str | None) -> str | None:
        return None if value is None else validate_template(value, LOCATOR_FIELDS)


class ScheduleConfig(_Strict):
    """How often the controls that time alone can fail (stale data) are judged: beside Kafka
    by a timer in the action, on the embedded store on the source's idle ticks, or from cron
    with ``datahub-reflex evaluate --due``. Unset: never on a schedule."""

    interval: str | None = Field(
        default=None,
        description="How often time-judged controls (stale data) run: a duration such as 15m, "
        "1h, 1d. Unset: never on a schedule.",
    )

    @field_validator("interval")
    @classmethod
    def _a_duration(cls, value: str | None) -> str | None:
        if value is not None:
            parse_duration(value)  # a TimeFormatError is a ValueError naming the problem
        return value

    @property
    def interval_seconds(self) -> int | None:
        return parse_duration(self.interval) if self.interval else None


class BacktestConfig(_Strict):
    sample_size: int = Field(
        default=DEFAULT_SAMPLE_SIZE, ge=0, description="Offending rows kept per snapshot."
    )
    memory_limit: str = Field(
        default=DEFAULT_MEMORY_LIMIT,
        description="The embedded engine's memory limit for a backtest (it spills to disk "
        "beyond it), e.g. 2GiB.",
    )

    @field_validator("memory_limit")
    @classmethod
    def _a_size(cls, value: str) -> str:
        return validate_memory_limit(value)


class EngineConfig(_Strict):
    """Where a platform's datasets are read: an engine (a name registered under
    ``reflex_actions.engines``) and its connection, given as the names of the environment
    variables holding each setting (``{url: REFLEX_POSTGRES_URL}``), so no secret is ever in a
    config, a log, a lesson page or a run event. A dataset's table is its urn's name, less the
    platform instance's prefix."""

    platform: str = Field(
        min_length=1, max_length=100, description="The DataHub platform, e.g. postgres."
    )
    platform_instance: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Only the datasets of this instance (urn names starting <instance>.).",
    )
    engine: str = Field(
        min_length=1,
        max_length=100,
        description="The engine its datasets are read on (registered under "
        "reflex_actions.engines): duckdb, postgres, spark.",
    )
    connection: dict[str, str] = Field(
        default_factory=dict,
        max_length=16,
        description="Each connection setting -> the environment variable holding it, never "
        "the value (e.g. url: REFLEX_POSTGRES_URL).",
    )

    @field_validator("connection")
    @classmethod
    def _environment_variable_names(cls, value: dict[str, str]) -> dict[str, str]:
        for setting, variable in value.items():
            if not ENVIRONMENT_VARIABLE.fullmatch(variable):
                raise ValueError(
                    f"connection setting {safe_excerpt(setting)} names no environment variable: "
                    "give the variable's name (e.g. REFLEX_POSTGRES_URL), never its value"
                )
        return value

    @model_validator(mode="after")
    def _a_registered_engine_and_its_settings(self) -> EngineConfig:
        """A mistyped engine or setting stops the action's start, naming the known ones, not
        every later run of a control on that platform."""
        from reflex_actions.engines import check_settings
        from reflex_actions.errors import ReflexError

        try:
            check_settings(self.engine, self.connection)
        except ReflexError as error:
            raise ValueError(str(error)) from None
        return self

    def table_name(self, dataset_name: str) -> str | None:
        """The table of a dataset of this platform (None when it is another instance's)."""
        if self.platform_instance is None:
            return dataset_name
        prefix = self.platform_instance + "."
        return dataset_name[len(prefix) :] if dataset_name.startswith(prefix) else None


class ReflexConfig(_Strict):
    catalog: str | None = Field(
        default=None,
        description="The catalog store (registered under reflex_actions.catalogs); unset: "
        "lite when store is set, else datahub (the server of the pipeline's datahub block).",
    )
    store: Path | None = Field(default=None, description="The embedded DataHub Lite file.")
    service_actor: str = Field(
        default="urn:li:corpuser:datahub-reflex",
        description="The user Reflex writes as; its own changes never pass a human gate.",
    )
    own_actors: list[str] = Field(
        default_factory=lambda: [DATAHUB_SYSTEM_ACTOR],
        description="Other actors DataHub may record for Reflex's own writes (with "
        "metadata-service auth off, GMS records tokenless writes as __datahub_system): their "
        "writes never pass a gate, and only their PENDING opens the approval gate.",
    )
    approvers: ApproversConfig = Field(
        default=ApproversConfig(),
        description="Who may pass the human gates, besides the owners of a lesson's term.",
    )
    trust_unauthenticated_actors: bool = Field(
        default=False,
        description="Accept human decisions from a DataHub server that authenticates no one "
        "(any caller may name any actor, and every lesson page says so). Off: refused.",
    )
    llm: LlmConfig | None = Field(
        default=None,
        description="The model that drafts lessons (through litellm); unset: the "
        "deterministic extractor, no model.",
    )
    histories: HistoriesConfig = Field(
        default=HistoriesConfig(), description="Where each dataset's snapshot history lives."
    )
    landing: LandingConfig = Field(
        default=LandingConfig(), description="Where newly landed snapshots are, and may be."
    )
    similarity: SimilarityConfig = Field(
        default=SimilarityConfig(),
        description="How similar assets are scored and which are recommended.",
    )
    backtest: BacktestConfig = Field(
        default=BacktestConfig(), description="How backtests sample and bound their memory."
    )
    schedule: ScheduleConfig = Field(
        default=ScheduleConfig(), description="How often time-judged controls run."
    )
    engines: list[EngineConfig] = Field(
        default_factory=list,
        max_length=64,
        description="The engines datasets are read on, by platform (a platform listed twice "
        "is matched by its instance first); files stay on the embedded DuckDB.",
    )

    def engine_for(self, platform: str, dataset_name: str) -> tuple[EngineConfig, str] | None:
        """The engine configured for a dataset, and its table's name there."""
        matching = [e for e in self.engines if e.platform == platform]
        for config in sorted(matching, key=lambda e: e.platform_instance is None):
            table = config.table_name(dataset_name)
            if table:
                return config, table
        return None

    def catalog_store(self) -> str:
        return self.catalog or ("lite" if self.store is not None else "datahub")
