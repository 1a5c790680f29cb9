"""The names of the noiseless strategies on the tree prior (THEORY.md sections 3 and 6), defined once:
``TREE_LOSS`` for :func:`fvsym.tree.tree_loss`, ``DERIVE`` for ``fv derive tree-loss``. Names only and no
imports, so a parser lists them without loading a derivation."""

TREE_LOSS = ("path", "top_levels", "optimal", "optimal_nonadaptive")

# fv derive also takes the class-named spelling (fv mc has optimal_nonadaptive_unit too); every strategy
# here is of the coordinate class, so it means tree_loss's optimal_nonadaptive, which stays as the old
# spelling; and fixed, a given design
CLASS_NAMED = {"optimal_nonadaptive_coordinate": "optimal_nonadaptive"}
DERIVE = TREE_LOSS[:3] + tuple(CLASS_NAMED) + TREE_LOSS[3:] + ("fixed",)
