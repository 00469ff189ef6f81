"""History folders are named by the dataset urn's name (DESIGN §5), the same name the report
uses; a dataset's shorter display name (``datasetProperties.name``) never decides anything."""

from __future__ import annotations

from pathlib import Path

from datahub.metadata.schema_classes import DatasetPropertiesClass

from reflex_actions.catalog.bootstrap import bootstrap_mcps
from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.catalog.steward import resolve_incident
from reflex_actions.config import ReflexConfig
from reflex_actions.demo.estate import dataset_urn
from reflex_actions.demo.history import PAYMENTS_INCIDENT, generate_histories
from reflex_actions.demo.metadata import estate_mcps
from reflex_actions.demo.run import PAYMENTS_NOTE, STEWARD, Demo
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.lesson_store import lesson_urn_for
from reflex_actions.lessons.model import LessonState
from reflex_actions.vocabulary import ROOT_CAUSE_STATUS
from tests.loop.store import store_of, stored_lesson

LESSON = lesson_urn_for(PAYMENTS_INCIDENT)
PAYMENTS = dataset_urn("finance.payments")


def _headline(report: str) -> str:
    return next(line for line in report.splitlines() if line.startswith("**Recommended scope**"))


def test_short_display_names_change_neither_the_backtest_nor_its_headline(
    tmp_path: Path, pending: Demo
) -> None:
    """The same estate, but every dataset displays only its table name ("payments"): the
    histories are still found by urn and the headline is the same."""
    workdir = tmp_path / "short-names"
    workdir.mkdir()
    generate_histories(workdir / "snapshots")
    mcps = estate_mcps()
    for mcp in mcps:
        if isinstance(mcp.aspect, DatasetPropertiesClass) and mcp.aspect.name:
            mcp.aspect.name = mcp.aspect.name.rsplit(".", 1)[-1]
    demo = Demo(workdir, say=lambda _: None)
    try:
        demo.catalog.emit([*bootstrap_mcps(), *mcps])
        demo.react()
        assert demo.catalog.dataset(PAYMENTS).name == "payments"  # type: ignore[union-attr]
        resolve_incident(demo.catalog, PAYMENTS_INCIDENT, PAYMENTS_NOTE, STEWARD)
        demo.react()
        demo.steward_sets(LESSON, ROOT_CAUSE_STATUS, "CONFIRMED")
        short = stored_lesson(store_of(workdir), LESSON)
    finally:
        demo.catalog.close()
    full = stored_lesson(store_of(pending.workdir), LESSON)

    assert short.state is LessonState.PENDING_APPROVAL
    assert "caught, 0 false alarms" in _headline(full.report)
    assert "precision 100%" in _headline(full.report)
    assert _headline(short.report) == _headline(full.report)


def test_the_history_folder_is_the_urn_name_and_stays_under_the_root(tmp_path: Path) -> None:
    root = tmp_path / "histories"
    (root / "payments.public.card_settlements").mkdir(parents=True)
    (root / "card_settlements").mkdir()
    (tmp_path / "outside").mkdir()
    catalog = LiteCatalog(tmp_path / "store.db")
    try:
        ctx = HandlerContext(catalog, ReflexConfig.model_validate({"histories": {"root": root}}))
        by_platform = HandlerContext(
            catalog,
            ReflexConfig.model_validate(
                {"histories": {"root": root, "folder": "{platform}/{name}"}}
            ),
        )
        card = "urn:li:dataset:(urn:li:dataPlatform:postgres,payments.public.card_settlements,PROD)"
        hostile = "urn:li:dataset:(urn:li:dataPlatform:postgres,../outside,PROD)"
        assert (
            ctx.histories.history_folder(card)
            == (root / "payments.public.card_settlements").resolve()
        )
        assert (
            by_platform.histories.history_folder(card)
            == (root / "postgres" / "payments.public.card_settlements").resolve()
        )
        assert ctx.histories.history_folder(hostile) is None
        history = ctx.histories.history_for(card)
        assert history is not None and history.dataset == "payments.public.card_settlements"
    finally:
        catalog.close()
