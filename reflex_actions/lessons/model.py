"""The lesson: what an incident taught, as typed data a steward confirms before anything runs."""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from reflex_actions.backtest.history import LearningSplit
from reflex_actions.backtest.metrics import BacktestReport, Scores, SnapshotOutcome
from reflex_actions.lessons.scope import ScopeRule
from reflex_actions.vocabulary import ROOT_CAUSE_STATUS


class LessonState(str, Enum):
    PROPOSED = "PROPOSED"  # drafted; waiting for a steward to confirm the root cause
    CONFIRMED = "CONFIRMED"  # root cause confirmed, control validated
    REJECTED = "REJECTED"  # a steward rejected it: nothing is ever published from it
    PENDING_APPROVAL = "PENDING_APPROVAL"  # backtested; waiting for scope approval
    PUBLISHED = "PUBLISHED"  # assertions published on the approved scope
    RETIRED = "RETIRED"  # a steward retired it: its assertions are removed, its record stays
    ERROR = "ERROR"  # Reflex could not go on (``Lesson.error`` says why); confirming retries


class LogPosition(BaseModel):
    """Where an event sits in the log Reflex reads: a stream (one Kafka topic partition, or
    the embedded store's change feed) and its offset there. Events on one entity share a
    stream (Kafka keys DataHub's change log by urn), so their positions give the order Reflex
    received them in, which no writer's clock can change (DESIGN §9)."""

    model_config = ConfigDict(frozen=True)

    stream: str
    offset: int

    def before(self, other: LogPosition | None) -> bool:
        """Whether this event came before ``other`` in the log; False when they cannot be
        ordered (another stream, or no position): such an event is judged as a new one."""
        return other is not None and self.stream == other.stream and self.offset < other.offset


class EventStamp(BaseModel):
    """Who made a change and when, as Reflex believes it: the actor DataHub recorded, the
    time (a writer's time ahead of Reflex's clock is taken as now), the event's place in the
    log, and whether DataHub authenticated the actor (with metadata-service authentication
    off it does not: any caller may name any actor)."""

    model_config = ConfigDict(frozen=True)

    actor: str | None
    at: int
    #: the event's place in the log: a redelivered event is recognised by it
    position: LogPosition | None = None
    authenticated: bool = True


#: Longest decision detail or recurrence resolution note a lesson's term keeps.
MAX_KEPT_TEXT = 1000


def _shortened(text: str) -> str:
    return text if len(text) <= MAX_KEPT_TEXT else text[: MAX_KEPT_TEXT - 1] + "…"


class Decision(EventStamp):
    """One human decision (or its refusal) on the lesson, and the event that carried it."""

    decision: str
    detail: str = ""

    def shortened(self) -> Decision:
        """The decision with its detail no longer than ``MAX_KEPT_TEXT``."""
        return self.model_copy(update={"detail": _shortened(self.detail)})


class RecurrenceResolution(BaseModel):
    by: str | None
    at: int
    note: str = ""


class Recurrence(BaseModel):
    """An incident B the lesson's control raised: where, on which snapshot, and its end."""

    incident: str
    dataset: str
    snapshot: str
    at: int
    resolved: RecurrenceResolution | None = None

    def shortened(self) -> Recurrence:
        """The recurrence with its resolution note no longer than ``MAX_KEPT_TEXT``."""
        if self.resolved is None:
            return self
        note = _shortened(self.resolved.note)
        return self.model_copy(update={"resolved": self.resolved.model_copy(update={"note": note})})


class OwnershipProposal(BaseModel):
    """A replacement owner waiting for a steward's approval on one dataset."""

    owner: str
    type: str
    reason: str
    incident: str


class IncidentText(BaseModel):
    """The words of the incident: data for the proposers, never instructions."""

    model_config = ConfigDict(frozen=True)

    urn: str
    title: str = ""
    description: str = ""
    resolution_note: str = ""
    affected_assets: tuple[str, ...] = ()

    def fields(self) -> dict[str, str]:
        return {
            "title": self.title,
            "description": self.description,
            "resolution_note": self.resolution_note,
        }


EvidenceSource = Literal["title", "description", "resolution_note", "catalog", "history"]


class Evidence(BaseModel):
    """A quoted span of the incident (verbatim), or a fact read from the catalog or history."""

    source: EvidenceSource
    quote: str = Field(min_length=1)


class ProposerInfo(BaseModel):
    name: Literal["deterministic", "llm"]
    model: str | None = None
    #: why the deterministic proposer stood in for the configured LLM, if it did
    fallback_reason: str | None = None


class LessonDraft(BaseModel):
    """What a proposer returns. The LLM must answer exactly this shape (as JSON)."""

    model_config = ConfigDict(extra="forbid")

    #: a registered kind's pattern, or ``unknown`` (checked against the kinds on validation)
    failure_pattern: str = Field(min_length=1, max_length=100)
    root_cause: str = Field(min_length=1, max_length=2000)
    evidence: list[Evidence] = Field(default_factory=list, max_length=20)
    #: the proposed control spec (validated against the control registry); None for `unknown`
    control: dict[str, Any] | None = None
    confidence: float = Field(ge=0.0, le=1.0)
    rationale: str = Field(default="", max_length=4000)
    #: users (corpuser urns) whose departure caused an ownership incident
    departed_users: list[str] = Field(default_factory=list, max_length=20)
    #: the snapshots the control's parameters were learned from (None: it learned none); a
    #: kind reading the history sets it, a model is never asked for it (it reads no history)
    learned_from: SkipJsonSchema[LearningSplit | None] = None


#: Snapshots of each dataset's timeline a lesson keeps with a backtest (the newest).
MAX_KEPT_OUTCOMES = 400
#: Longest reason kept with a kept snapshot outcome.
MAX_KEPT_REASON = 200


class BacktestSummary(BaseModel):
    """What a backtest found, kept with the lesson and each version approved on it: the
    figures on the scope it recommended, the whole report's, and each dataset's timeline."""

    scope: Scores
    overall: Scores
    #: the newest outcomes of every dataset backtested, without samples, oldest first
    outcomes: list[SnapshotOutcome] = Field(default_factory=list)

    @classmethod
    def of(cls, report: BacktestReport, scope: Scores) -> BacktestSummary:
        kept: list[SnapshotOutcome] = []
        for dataset in report.datasets:
            for outcome in report.outcomes_for(dataset.dataset)[-MAX_KEPT_OUTCOMES:]:
                reason = (outcome.reason or "")[:MAX_KEPT_REASON] or None
                kept.append(outcome.model_copy(update={"sample": [], "reason": reason}))
        overall = Scores.model_validate(report.model_dump(include=set(Scores.model_fields)))
        return cls(scope=scope, overall=overall, outcomes=kept)

    def datasets(self) -> list[str]:
        return list(dict.fromkeys(o.dataset for o in self.outcomes))

    def outcomes_for(self, dataset: str) -> list[SnapshotOutcome]:
        return [o for o in self.outcomes if o.dataset == dataset]

    def latest(self, kept: int) -> BacktestSummary:
        """The summary with at most ``kept`` outcomes: as many of each dataset's newest (the
        first datasets only, when there are more datasets than ``kept``)."""
        if len(self.outcomes) <= kept:
            return self
        by_dataset: dict[str, list[SnapshotOutcome]] = {}
        for outcome in self.outcomes:
            by_dataset.setdefault(outcome.dataset, []).append(outcome)
        each = max(1, kept // len(by_dataset))
        newest = [o for found in list(by_dataset.values())[:kept] for o in found[-each:]]
        return self.model_copy(update={"outcomes": newest})


class Revision(BaseModel):
    """A new version drafted while another is in force (or after retirement): why it was
    drafted, by whom, and the state the lesson returns to when it is refused."""

    origin: str
    requested_by: str | None
    at: int
    #: the version whose control and scope a rollback republishes
    rollback_of: int | None = None
    resume: Literal["PUBLISHED", "RETIRED"] = "PUBLISHED"


class ApprovedVersion(BaseModel):
    """One approved version: the control and scope the approval decided on, who approved them,
    when, on what backtest, and what it was published as."""

    control: dict[str, Any]
    scope: list[str]
    actor: str
    #: the rule its scope is besides the datasets ``scope`` lists, when it is one: the
    #: datasets matching it when the approval was handled (they are not listed here)
    scope_rule: ScopeRule | None = None
    #: how many datasets it was published on, once its rollout is done
    published_count: int = 0
    #: the approval event's time (epoch millis): events before it are judged without this version
    at: int
    digest: str
    #: 1 for the first approval, then one more per approved version
    number: int = 1
    #: how it came about: drafted from the incident, a steward's edit, a rollback
    origin: str = ""
    rollback_of: int | None = None
    backtest: BacktestSummary | None = None
    #: its report and field mappings, restored when a later draft is refused
    report: str = ""
    field_mappings: dict[str, dict[str, str]] = Field(default_factory=dict)
    published_scope: list[str] = Field(default_factory=list)
    #: as stored: its report, field mappings and backtest are the lesson's own, kept once there
    kept_on_lesson: bool = False
    #: as stored: its scope (and, for the version in force, where it was published) is the
    #: lesson's published scope, kept once there: a scope may be as large as the estate
    scope_on_lesson: bool = False

    def compact(self) -> ApprovedVersion:
        """What the list of versions keeps of it: what a rollback drafts again (its control
        and scope), what was approved (its digest) and what the page shows (who, when, the
        backtest's figures); the version in force keeps the rest as ``Lesson.approved``."""
        figures = self.backtest.model_copy(update={"outcomes": []}) if self.backtest else None
        return self.model_copy(
            update={"backtest": figures, "report": "", "field_mappings": {}, "published_scope": []}
        )

    @staticmethod
    def digest_of(control: dict[str, Any], scope: list[str], rule: ScopeRule | None = None) -> str:
        """A stable digest of a control spec and a scope (order and repeats do not matter),
        and of the scope's rule when it has one."""
        approved: dict[str, Any] = {"control": control, "scope": sorted(set(scope))}
        if rule is not None:
            approved["rule"] = rule.text()
        canonical = json.dumps(approved, sort_keys=True, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()


class Rollout(BaseModel):
    """A version published slice by slice (a rule's datasets may be the whole estate): the
    datasets of ``publish`` in urn order, then the datasets of the versions in ``withdraw``
    that ``publish`` does not cover. Each slice is one decision; the next starts after
    ``after``, so a crash resumes where it stopped."""

    #: the version being published (None: only withdrawing, once retired)
    publish: int | None
    #: the earlier versions whose other datasets are withdrawn once it is published
    withdraw: list[int] = Field(default_factory=list)
    phase: Literal["publish", "withdraw"] = "publish"
    #: the last dataset urn the phase handled
    after: str = ""
    published: int = 0
    skipped: int = 0
    withdrawn: int = 0

    def progress(self) -> str:
        """Where it is, in words, for the lesson's page."""
        done = f"{self.published:,} published, {self.skipped:,} skipped"
        if self.withdrawn:
            done += f", {self.withdrawn:,} withdrawn"
        what = f"publishing version {self.publish}" if self.publish else "withdrawing"
        return f"{what} in slices: {done} so far"


#: The latest of each record a lesson's term keeps (:meth:`Lesson.bounded`); the older ones
#: are counted, and an older recurrence stays an incident B in DataHub. Stored and on the page,
#: a decision takes about 0.6 KB, a recurrence 0.5 KB, a version 1.5 KB (with a scope of a few
#: datasets).
KEPT_DECISIONS = 50
#: The reasons a lesson keeps for the scoped datasets it could not be published on (the
#: rollout counts them all).
KEPT_SKIPPED = 20
KEPT_RECURRENCES = 100
KEPT_VERSIONS = 20
#: Backtest outcomes a lesson's term keeps for its timelines, in all (about 0.5 KB each).
KEPT_OUTCOMES = 240


#: A published scope longer than this (as JSON) is stored packed: zlib over its JSON, in base64.
#: Urns share their prefixes, so a scope packs 8-10x (1,600 datasets: 138 KB -> 17 KB).
PACKED_SCOPE_FROM = 8 * 1024
#: Most bytes a packed scope unpacks to: a hand-written record cannot inflate past it.
MAX_UNPACKED_SCOPE = 16 * 1024 * 1024


def pack_scope(scope: list[str]) -> str:
    """``scope`` as the lesson's record stores a large one (:data:`PACKED_SCOPE_FROM`)."""
    return base64.b64encode(zlib.compress(json.dumps(scope).encode(), 9)).decode()


def unpack_scope(packed: object) -> list[str]:
    """The scope :func:`pack_scope` packed; ValueError for anything else, a record that
    would inflate past :data:`MAX_UNPACKED_SCOPE` included."""
    try:
        data = base64.b64decode(str(packed), validate=True)
        inflater = zlib.decompressobj()
        raw = inflater.decompress(data, MAX_UNPACKED_SCOPE)
        if inflater.unconsumed_tail:
            raise ValueError(f"it unpacks to more than {MAX_UNPACKED_SCOPE} bytes")
        scope = json.loads(raw)
    except (ValueError, zlib.error) as error:
        raise ValueError(f"packed_scope is not a packed scope: {error}") from None
    if not isinstance(scope, list) or not all(isinstance(urn, str) for urn in scope):
        raise ValueError("packed_scope is not a packed list of urns")
    return scope


def packed_if_large(scope: list[str]) -> str | None:
    """``scope`` packed when its JSON is longer than :data:`PACKED_SCOPE_FROM`, else None."""
    return pack_scope(scope) if len(json.dumps(scope)) > PACKED_SCOPE_FROM else None


def stored_scope_bytes(scope: list[str]) -> int:
    """What ``scope`` takes in the lesson's record: its JSON, or packed when that is large."""
    packed = packed_if_large(scope)
    return len(packed) if packed is not None else len(json.dumps(scope))


class Lesson(BaseModel):
    """A lesson as Reflex stores it on its glossary term."""

    urn: str
    incident: str
    source_dataset: str | None
    affected_assets: list[str]
    failure_pattern: str
    root_cause: str
    evidence: list[Evidence]
    control: dict[str, Any] | None
    confidence: float
    rationale: str
    proposer: ProposerInfo
    state: LessonState = LessonState.PROPOSED
    #: the last validation error of a steward's edit, shown on the lesson page
    validation_error: str | None = None
    #: why Reflex could not go on, while the lesson is in ERROR
    error: str | None = None
    #: every human decision and refusal, oldest first (the term keeps the latest)
    decisions: list[Decision] = Field(default_factory=list)
    #: how many older decisions the term no longer keeps
    older_decisions: int = 0
    #: stream of the event log -> the latest place in it of a decision the term no longer
    #: keeps: an event there or before made its decisions already
    older_decisions_through: dict[str, int] = Field(default_factory=dict)
    #: which users' departure caused an ownership incident
    departed_users: list[str] = Field(default_factory=list)
    #: the source's snapshots the control's parameters were learned from, and those held out
    #: (None when the kind learned nothing from the history); the backtest reports them apart
    learned_from: LearningSplit | None = None
    #: the source's snapshots taken as the incident's failures because its dates point at them
    #: (``labels.yaml`` names none of its own); its backtest labels them so too
    dated_failures: list[str] = Field(default_factory=list)
    #: the proposal report (similar assets, backtest) in markdown, once backtested
    report: str = ""
    #: dataset urn -> control field -> that dataset's field, where names differ
    field_mappings: dict[str, dict[str, str]] = Field(default_factory=dict)
    #: datasets the control was published on
    published_scope: list[str] = Field(default_factory=list)
    #: scoped datasets it could not be published on, each with the reason (the first
    #: ``KEPT_SKIPPED``; a rollout counts them all)
    publish_skipped: list[str] = Field(default_factory=list)
    #: the version being published, or withdrawn, slice by slice, until it is done
    rollout: Rollout | None = None
    #: incidents B this lesson's controls raised, oldest first (the term keeps the latest)
    recurrences: list[Recurrence] = Field(default_factory=list)
    #: how many older recurrences the term no longer keeps (they stay incidents B in DataHub)
    older_recurrences: int = 0
    #: dataset urn -> the owner change waiting for approval there
    ownership_proposals: dict[str, OwnershipProposal] = Field(default_factory=dict)
    #: gate property urn -> the value Reflex last set or accepted; a refused edit goes back to it
    gate_values: dict[str, str] = Field(default_factory=lambda: {ROOT_CAUSE_STATUS: "PROPOSED"})
    #: True once Reflex's own PENDING (written after the report) was seen in the event log:
    #: only an approval written after it decides on a report that existed
    approval_open: bool = False
    #: exactly what the version in force (or, once retired, the last) was approved on
    approved: ApprovedVersion | None = None
    #: every approved version, oldest first (the last is ``approved``); the term keeps the
    #: latest, each compact, and the one a waiting rollback drafts again
    versions: list[ApprovedVersion] = Field(default_factory=list)
    #: the draft waiting for approval while ``approved`` stays in force, if there is one
    revision: Revision | None = None
    #: the backtest of the current draft (or of the version in force)
    backtest: BacktestSummary | None = None
    #: where the latest event on the lesson's properties that made a decision is in the log:
    #: an earlier one was judged already, or was overtaken by it (a replay of the log), and
    #: decides nothing
    judged: LogPosition | None = None
    #: since when (epoch millis) its controls have run without a break: events before it are
    #: judged without the lesson, so a replayed old event never runs it
    in_force_since: int | None = None
    #: as stored: the published scope packed (:func:`pack_scope`) when it is large; loading
    #: the record unpacks it into ``published_scope``
    packed_scope: SkipJsonSchema[str] = ""

    @model_validator(mode="before")
    @classmethod
    def _scope_unpacked(cls, data: Any) -> Any:
        """A record holding its published scope packed gives it back as the list."""
        if isinstance(data, dict) and data.get("packed_scope"):
            data = {
                **data,
                "published_scope": unpack_scope(data["packed_scope"]),
                "packed_scope": "",
            }
        return data

    @model_validator(mode="after")
    def _versions_of_older_records(self) -> Lesson:
        """A lesson stored before versions were kept has its approval as version 1."""
        if self.approved is not None and not self.versions:
            self.versions = [self.approved]
            if self.state is LessonState.PUBLISHED and self.in_force_since is None:
                self.in_force_since = self.approved.at
        return self

    @model_validator(mode="after")
    def _approved_as_stored(self) -> Lesson:
        """The version in force stored its report, mappings and backtest once, as the lesson's;
        a version its scope, as the lesson's published scope."""
        scope = self.published_scope
        self.versions = [
            v.model_copy(update={"scope": scope, "scope_on_lesson": False})
            if v.scope_on_lesson
            else v
            for v in self.versions
        ]
        if self.approved is not None and self.approved.scope_on_lesson:
            self.approved = self.approved.model_copy(
                update={"scope": scope, "published_scope": scope, "scope_on_lesson": False}
            )
        if self.approved is not None and self.approved.kept_on_lesson:
            self.approved = self.approved.model_copy(
                update={
                    "report": self.report,
                    "field_mappings": self.field_mappings,
                    "backtest": self.backtest,
                    "kept_on_lesson": False,
                }
            )
        return self

    @property
    def decision_count(self) -> int:
        """Every decision recorded on the lesson, kept on its term or not."""
        return self.older_decisions + len(self.decisions)

    @property
    def recurrence_count(self) -> int:
        """Every incident B the lesson's controls raised, kept on its term or not."""
        return self.older_recurrences + len(self.recurrences)

    @property
    def version_count(self) -> int:
        """How many versions were approved: they are numbered from 1, the latest is kept."""
        return self.versions[-1].number if self.versions else 0

    @property
    def next_version(self) -> int:
        return self.version_count + 1

    def version(self, number: int) -> ApprovedVersion | None:
        """Approved version ``number``, if the lesson keeps it."""
        return next((v for v in self.versions if v.number == number), None)

    def unkept_version(self, number: int) -> str:
        """Why approved version ``number``, which the lesson no longer keeps, cannot be drafted
        again."""
        runs: list[list[int]] = []
        for kept in (v.number for v in self.versions):
            if runs and kept == runs[-1][-1] + 1:
                runs[-1].append(kept)
            else:
                runs.append([kept])
        shown = ", ".join(f"{r[0]} to {r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)
        return (
            f"version {number} is older than the versions this lesson keeps ({shown}): its "
            "control and scope are no longer on record; roll back to a kept one, or edit "
            "reflex.controlSpec and reflex.scope to draft a new version"
        )

    def bounded(self, share: float = 1.0) -> Lesson:
        """The lesson as its term keeps it, whatever its history: the latest ``share`` of each
        record (``KEPT_DECISIONS``, ``KEPT_RECURRENCES``, ``KEPT_VERSIONS``, ``KEPT_OUTCOMES``),
        the older decisions and recurrences counted, long notes shortened, every version
        compact, and the version in force's report, mappings and backtest stored once when
        they are the lesson's own. What decides stays: ``judged``, the gate values, where in
        the log the decisions no longer kept were (their redelivery is still known), the
        version in force and the one a waiting rollback returns to."""

        def window(kept: int) -> int:
            return max(1, round(kept * share))

        decisions = self.decisions[-window(KEPT_DECISIONS) :]
        unkept = self.decisions[: len(self.decisions) - len(decisions)]
        recurrences = self.recurrences[-window(KEPT_RECURRENCES) :]
        unkept_recurrences = len(self.recurrences) - len(recurrences)
        outcomes = window(KEPT_OUTCOMES)
        return self.model_copy(
            update={
                "decisions": [d.shortened() for d in decisions],
                "older_decisions": self.older_decisions + len(unkept),
                "older_decisions_through": self._decided_through(unkept),
                "recurrences": [r.shortened() for r in recurrences],
                "older_recurrences": self.older_recurrences + unkept_recurrences,
                "versions": self._kept_versions(window(KEPT_VERSIONS)),
                "backtest": self.backtest.latest(outcomes) if self.backtest else None,
                "approved": self._approved_as_kept(outcomes),
            }
        )

    def _decided_through(self, unkept: list[Decision]) -> dict[str, int]:
        """``older_decisions_through`` once these decisions are no longer kept either."""
        through = dict(self.older_decisions_through)
        for position in (d.position for d in unkept if d.position is not None):
            through[position.stream] = max(position.offset, through.get(position.stream, -1))
        return through

    def _kept_versions(self, latest: int) -> list[ApprovedVersion]:
        """The ``latest`` versions and the one a waiting rollback returns to, compact."""
        kept = {v.number for v in self.versions[-latest:]}
        if self.revision is not None and self.revision.rollback_of is not None:
            kept.add(self.revision.rollback_of)
        return [v.compact() for v in self.versions if v.number in kept]

    def record_json(self) -> str:
        """The lesson as its term's record holds it: a version's scope that is the lesson's
        published scope kept once, there (a scope may be as large as the estate); loading the
        record gives it back."""
        approved = self.approved
        if approved is not None and approved.published_scope:
            approved = self._scope_as_kept(approved)
        versions = [self._scope_as_kept(v) for v in self.versions]
        kept = self.model_copy(update={"approved": approved, "versions": versions})
        if (packed := packed_if_large(self.published_scope)) is not None:
            kept = kept.model_copy(update={"published_scope": [], "packed_scope": packed})
        return kept.model_dump_json()

    def _scope_as_kept(self, version: ApprovedVersion) -> ApprovedVersion:
        """The version with its scope (and where it was published, when it holds that) left
        to the lesson when they are the lesson's published scope."""
        if (
            not self.published_scope
            or version.scope != self.published_scope
            or version.published_scope not in ([], self.published_scope)
        ):
            return version
        return version.model_copy(
            update={"scope": [], "published_scope": [], "scope_on_lesson": True}
        )

    def _approved_as_kept(self, outcomes: int) -> ApprovedVersion | None:
        """The version in force as stored: its report, mappings and backtest left to the
        lesson when they are the lesson's own (no draft waits), else its own ``outcomes``."""
        approved = self.approved
        if approved is None:
            return None
        if (approved.report, approved.field_mappings, approved.backtest) == (
            self.report,
            self.field_mappings,
            self.backtest,
        ):
            empty = {"report": "", "field_mappings": {}, "backtest": None}
            return approved.model_copy(update={**empty, "kept_on_lesson": True})
        if approved.backtest is None:
            return approved
        return approved.model_copy(update={"backtest": approved.backtest.latest(outcomes)})

    @property
    def in_force(self) -> bool:
        """Whether an approved version runs now: published, or beside a draft waiting for
        approval; never once retired (nor a retired lesson's rollback before it is approved)."""
        return self.in_force_since is not None and self.state in (
            LessonState.PUBLISHED,
            LessonState.PENDING_APPROVAL,
        )

    def in_force_on(self, dataset_urn: str) -> bool:
        """Whether the version in force runs on this dataset, as its record says: a rule's
        datasets are not listed there (the caller asks the store where it was published)."""
        return self.in_force and dataset_urn in self.published_scope

    @property
    def scope_rule(self) -> ScopeRule | None:
        """The rule the version in force's scope is, if it is one."""
        return self.approved.scope_rule if self.approved is not None and self.in_force else None

    @property
    def published_count(self) -> int:
        """On how many datasets the version in force runs (so far, while it is rolled out)."""
        if not self.in_force or self.approved is None:
            return 0
        if self.approved.scope_rule is None:
            return len(self.published_scope)
        if self.rollout is not None and self.rollout.publish == self.approved.number:
            return self.rollout.published
        return self.approved.published_count

    def record_decision(self, decision: str, event: EventStamp, detail: str = "") -> bool:
        """Add a decision to the lesson's record unless this very one (same decision and
        actor, from the same event: its log position, else its time) is there already, or the
        event is no later in the log than a decision no longer kept; True when it was added."""
        key = (decision, event.actor, event.position or event.at)
        if any((d.decision, d.actor, d.position or d.at) == key for d in self.decisions):
            return False
        position = event.position
        if position and position.offset <= self.older_decisions_through.get(position.stream, -1):
            return False
        self.decisions.append(Decision(decision=decision, detail=detail, **dict(event)))
        return True

    def note_recurrence(self, recurrence: Recurrence) -> bool:
        """Add an incident B to the lesson's record unless it is there already; True when it
        was added. (One older than those kept is never judged again: its run marks it judged.)"""
        if any(r.incident == recurrence.incident for r in self.recurrences):
            return False
        self.recurrences.append(recurrence)
        return True
