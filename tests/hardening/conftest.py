"""The loop's demo stages (``drafted``, ``pending``, ``published``) for end-to-end tests."""

from tests.loop.conftest import *  # noqa: F403
