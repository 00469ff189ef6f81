"""The demo estate: a finance domain, its snapshot histories and its ownership history."""
