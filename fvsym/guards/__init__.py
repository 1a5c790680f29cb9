"""Prices and guards of the exact layer: the time cap and the memory probe (``fvsym.guards.limits``), the prices
of derivations (``fvsym.guards.costs``)."""
