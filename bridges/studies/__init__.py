"""Studies: fv reproduce, fv scaling, sweeps, figures."""
