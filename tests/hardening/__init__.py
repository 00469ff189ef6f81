"""Hardening against hostile input: specs, landing paths, page text."""
