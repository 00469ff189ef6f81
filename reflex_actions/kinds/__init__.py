"""The built-in lesson kinds, one module each, registered like a kind from another package
(entry point group ``reflex_actions.kinds``; the registry the core asks is
:mod:`reflex_actions.registry`)."""
