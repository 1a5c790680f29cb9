"""The Monte Carlo engine: channels, the simulation, seeded chunks, the numba kernels and their numpy twins."""
