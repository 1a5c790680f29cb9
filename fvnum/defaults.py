"""The defaults the Python API and the command line share, one constant each, read by both (a function's
keyword default and its ``fv`` option's default), so ``comparison_table(...)`` and ``fv compare`` give the
same table. Standard library only: the parsers read it without loading numpy. ``tests/test_defaults_agree.py``
walks the parsers and the functions and configurations they set and holds the defaults equal."""

KEYED = "weighted"  # the key family of the prediction rows of Models A and B (fvnum.keys.nonadaptive); None: linear keys
