"""Lesson kinds written outside ``reflex_actions``, installed into the tests through an entry
point (see ``tests/kinds/conftest.py``): the proof that the kind contract is all a kind needs."""
