"""fvsym: the symbolic core. Derives the Bellman recursions and the Gaussian and tree loss formulas
of THEORY.md with sympy. Imports nothing heavier than sympy."""
from . import _symbols as symbols
from ._formula import Formula
from .priors import GaussianPrior, TreePrior

__all__ = ["Formula", "GaussianPrior", "TreePrior", "symbols"]
