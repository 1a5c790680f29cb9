"""Measurements laid beside the theory: comparisons, audits, probes."""
