"""Runs: configurations, options, the run store, the cell engine, result types."""
