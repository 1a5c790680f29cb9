"""fvsym: the symbolic core. Derives the Bellman recursions and the Gaussian and tree loss formulas
of docs/theory.md with sympy. Imports nothing heavier than sympy."""
from fvsym import _symbols as symbols
from fvsym._formula import Formula
from fvsym.priors import GaussianPrior, TreePrior

__all__ = ["Formula", "GaussianPrior", "TreePrior", "symbols"]
