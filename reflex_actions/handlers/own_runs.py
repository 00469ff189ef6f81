"""Reflex's own run events: the only ones it reads to decide (DESIGN §9).

Anyone may write an ``assertionRunEvent`` on Reflex's assertion. Believing one would let a
forged run dated 2100 stop every later run ("already judged"), or a forged row count make a
half load pass a volume control. So Reflex reads a run only when it wrote it: the embedded
store records each value's writer; GMS's timeseries index keeps none, so on a server Reflex
seals its run events with a key derived from its own credentials (a keyed hash of what it
reads back) and believes a run whose seal holds. A run anyone else wrote is ignored and logged.

"Already judged" is keyed by what was judged (the assertion and the run's id: a snapshot id,
a partition, a commit, a slot), never by the largest time seen.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

from datahub.metadata.schema_classes import AssertionRunEventClass

from reflex_actions.bounded import excerpt
from reflex_actions.catalog.base import Catalog, Written

logger = logging.getLogger(__name__)

#: ``nativeResults`` key of the seal on Reflex's run events (when the store keeps no writer).
RUN_SEAL = "reflex_seal"
#: How many of an assertion's newest run events are read to find Reflex's latest own one: a
#: flood of forged runs beyond it costs a volume control its carried counts (it then judges
#: on the dataset's history, as on a first run), never a false pass.
RECENT_RUNS = 50
#: How many runs of one id are read to find Reflex's own among them.
RUNS_OF_AN_ID = 20


def _sealed_content(run: AssertionRunEventClass) -> bytes:
    """What the seal covers: everything Reflex reads back from a run."""
    result = run.result
    native = {
        k: v for k, v in ((result.nativeResults if result else None) or {}).items() if k != RUN_SEAL
    }
    content = [
        run.assertionUrn,
        run.asserteeUrn,
        run.runId,
        run.timestampMillis,
        result.type if result else None,
        native,
    ]
    return json.dumps(content, sort_keys=True, default=str).encode()


def _seal_of(run: AssertionRunEventClass, key: bytes) -> str:
    return hmac.new(key, _sealed_content(run), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class OwnRuns:
    """The run events Reflex wrote on its assertions, read from the store."""

    catalog: Catalog
    #: whether the store recorded a writer as Reflex
    is_own: Callable[[str | None], bool]
    #: the seal's key (None: Reflex holds no secret, and cannot tell a run's writer)
    key: bytes | None = None

    def seal(self, run: AssertionRunEventClass) -> AssertionRunEventClass:
        """Seal a run event Reflex is about to write (nothing without a key)."""
        if self.key is not None and run.result is not None:
            native = {k: v for k, v in (run.result.nativeResults or {}).items() if k != RUN_SEAL}
            run.result.nativeResults = native
            native[RUN_SEAL] = _seal_of(run, self.key)
        return run

    def latest(self, assertion: str) -> AssertionRunEventClass | None:
        """Reflex's newest own run on the assertion, or None."""
        return next(iter(self._own(assertion, None, RECENT_RUNS)), None)

    def judged(self, assertion: str, run_id: str) -> bool:
        """Whether Reflex already judged this run id on the assertion."""
        return bool(self._own(assertion, run_id, RUNS_OF_AN_ID))

    def _own(self, assertion: str, run_id: str | None, limit: int) -> list[AssertionRunEventClass]:
        """Reflex's own among the newest ``limit`` runs (of ``run_id``), newest first. The
        newest alone is read first: it is Reflex's own unless someone wrote beside it."""
        where = {"runId": run_id} if run_id is not None else None
        for batch in (1, limit):
            written = self.catalog.timeseries_written(
                assertion, AssertionRunEventClass, limit=batch, where=where
            )
            own = [w.aspect for w in written if self._by_reflex(w)]
            if own or len(written) < batch:
                break
        for foreign in (w for w in written if w.aspect not in own):
            logger.warning(
                "a run event on Reflex's assertion %s (run %s) was not written by Reflex "
                "(written by %s): ignored",
                assertion,
                excerpt(foreign.aspect.runId),
                foreign.writer or "a writer without Reflex's seal",
            )
        return own

    def _by_reflex(self, written: Written[AssertionRunEventClass]) -> bool:
        if written.writer is not None:
            return self.is_own(written.writer)
        if self.key is None:
            return True  # no writer recorded and no secret to seal with: nothing tells them apart
        native = (written.aspect.result.nativeResults if written.aspect.result else None) or {}
        given = native.get(RUN_SEAL, "")
        return isinstance(given, str) and hmac.compare_digest(
            given, _seal_of(written.aspect, self.key)
        )
