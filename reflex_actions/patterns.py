"""Failure patterns: each registered lesson kind names one (``reflex_actions.kinds``).

The core knows only the pattern of a lesson no kind recognised.
"""

from __future__ import annotations

#: The pattern of a draft whose incident fits no registered kind: it proposes no control until a
#: steward names one (the control's kind then names the pattern).
UNKNOWN_PATTERN = "unknown"
