"""The command line, `python -m hooks`: serve, render, plan, crds."""
