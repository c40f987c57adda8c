"""Offline analysis of finished runs: metrics, behaviour labels, and significance tests."""
