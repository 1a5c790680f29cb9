"""Priors: the protocol and registry, the tree, Gaussian, finite-atom and mixture priors, their checks."""
from fvsym._moved import room_getattr

# fvnum.priors was one module, now fvnum.priors.registry: its names stay importable from here, loaded on first use
__getattr__ = room_getattr(__name__, "fvnum.priors.registry", ('atoms', 'atoms_arrays', 'capabilities', 'checks', 'gaussian', 'mixture', 'registry', 'tree'))
