"""Benchmarks of the hook server (run as scripts, never collected by pytest); see README.md."""
