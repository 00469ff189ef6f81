"""Everything Reflex renders for people: the lesson page, the proposal report, backtest tables
and timelines. Untrusted text goes through :mod:`reflex_actions.report.markdown`."""
