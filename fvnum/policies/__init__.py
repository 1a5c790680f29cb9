"""Strategies as policies: the objects, their registry, the policies, the design searches."""
