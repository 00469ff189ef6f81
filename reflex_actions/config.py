"""The `reflex` action's configuration (the `action.config` block of the actions YAML); plain
pydantic, read by the handlers and the action alike."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from reflex_actions.backtest.engine import DEFAULT_MEMORY_LIMIT, DEFAULT_SAMPLE_SIZE
from reflex_actions.lessons.llm import LlmConfig
from reflex_actions.similarity.config import SimilarityConfig
from reflex_actions.times import parse_duration

#: the actor GMS records for system-client and (with metadata-service auth off) tokenless writes
DATAHUB_SYSTEM_ACTOR = "urn:li:corpuser:__datahub_system"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ApproversConfig(_Strict):
    """Who may pass the human gates (besides the owners of the lesson's glossary term)."""

    users: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)


class HistoriesConfig(_Strict):
    """Where each dataset's snapshot history lives: ``root / folder``, where ``{name}`` is the
    dataset urn's name (``payments.public.card_settlements``, never the shorter display name,
    which collides across schemas and platforms) and ``{platform}`` the urn's platform (e.g.
    ``{platform}/{name}`` for a platform level). Datasets without a folder have no history."""

    root: Path | None = None
    folder: str = "{name}"


class LandingConfig(_Strict):
    """Where a newly landed snapshot is, and where it may be.

    An operation names its snapshot in ``customProperties.snapshot`` (a path); otherwise the
    ``locator`` template is filled from the dataset (``{name}``, ``{platform}``) and the
    operation (``{snapshot_id}`` = ``customProperties.snapshot_id``, else the partition). The
    resolved path must lie under one of ``allowed_roots``, or the snapshot is refused.
    """

    allowed_roots: list[Path] = Field(default_factory=list)
    locator: str | None = None


class ScheduleConfig(_Strict):
    """How often the controls that time alone can fail (stale data) are judged: beside Kafka
    by a timer in the action, on the embedded store on the source's idle ticks, or from cron
    with ``datahub-reflex evaluate --due``. Unset: never on a schedule."""

    #: a duration: 15m, 1h, 1d
    interval: str | None = None

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
    sample_size: int = Field(default=DEFAULT_SAMPLE_SIZE, ge=0)
    memory_limit: str = DEFAULT_MEMORY_LIMIT


class ReflexConfig(_Strict):
    #: the catalog store (a name registered under ``reflex_actions.catalogs``); unset: ``lite``
    #: when ``store`` is set, else ``datahub`` (the server of the pipeline's `datahub:` block)
    catalog: str | None = None
    #: the embedded DataHub Lite file
    store: Path | None = None
    #: the user Reflex writes as; its own changes never pass a human gate
    service_actor: str = "urn:li:corpuser:datahub-reflex"
    #: other actors DataHub may record for Reflex's own writes: with metadata-service auth off,
    #: GMS records every tokenless write as ``__datahub_system`` (DESIGN §9). Their writes never
    #: pass a gate, and only their PENDING opens the approval gate.
    own_actors: list[str] = Field(default_factory=lambda: [DATAHUB_SYSTEM_ACTOR])
    approvers: ApproversConfig = ApproversConfig()
    #: unset = the deterministic proposer (no model)
    llm: LlmConfig | None = None
    histories: HistoriesConfig = HistoriesConfig()
    landing: LandingConfig = LandingConfig()
    similarity: SimilarityConfig = SimilarityConfig()
    backtest: BacktestConfig = BacktestConfig()
    schedule: ScheduleConfig = ScheduleConfig()

    def catalog_store(self) -> str:
        return self.catalog or ("lite" if self.store is not None else "datahub")
