"""The streamparse benchmark: `python -m bench` (or `python bench/run.py`) from the repository root.

See `bench/cli.py` for what it prints; `--quick` for a shorter run, `--format NAME` for one format,
`--profile` for where the streaming time goes.
"""
