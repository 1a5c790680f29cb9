"""The names of the noiseless strategies on the tree prior (docs/theory.md sections 3 and 6), defined once:
``TREE_LOSS`` for :func:`fvsym.tree.tree_loss`, ``DERIVE`` for ``fv derive tree-loss``. Names only and no
imports, so a parser lists them without loading a derivation.

One meaning per name: the best fixed design has two classes (coordinate rows, searched exactly here; unit rows,
searched by ``fv mc``), so its name says the class (``optimal_nonadaptive_coordinate``,
``optimal_nonadaptive_unit``). The bare ``optimal_nonadaptive`` is refused by ``fv derive``, ``fv mc`` and
``fvnum.loss_mc`` (without a ``measurement``) in one line, :data:`SAY_THE_CLASS`. :func:`fvsym.tree.tree_loss`,
which knows only the coordinate class, keeps it as the name of its formula (``tree_loss_optimal_nonadaptive``)."""

BARE = "optimal_nonadaptive"  # the name without its class
SAY_THE_CLASS = "say the class: optimal_nonadaptive_coordinate or optimal_nonadaptive_unit"
TREE_LOSS = ("path", "top_levels", "optimal", "optimal_nonadaptive_coordinate", BARE)

# every strategy here is of the coordinate class, so the class-named spelling is tree_loss's optimal_nonadaptive;
# fixed: a given design
CLASS_NAMED = {"optimal_nonadaptive_coordinate": BARE}
DERIVE = ("path", "top_levels", "optimal", "optimal_nonadaptive_coordinate", "fixed")


def bare_refusal(strategy: str) -> str:
    """The one line that refuses ``optimal_nonadaptive`` without its class."""
    return f"strategy {strategy!r} names no class of measurement: {SAY_THE_CLASS}"
