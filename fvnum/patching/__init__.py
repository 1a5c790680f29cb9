"""Interventions on theory policies: key patching (docs/theory.md section 8: ``fvnum.patching.keys``, keyed
``fvnum.patching.keyed``), state transplant and injection (9b: ``fvnum.patching.state``, its tables
``fvnum.patching.state_tables``). The public verbs are ``fvnum``'s (``fvnum.patching_table``, ...)."""
