"""The bench suite: a model zoo timed under eager, kiln and the peers (bench/run.py)."""
