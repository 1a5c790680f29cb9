"""fvnum: numbers for the theory. Numba-accelerated Monte Carlo with exact Bayes posteriors."""
