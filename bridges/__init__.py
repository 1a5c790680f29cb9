"""bridges: the torch side. Trains Models A, B, C of THEORY.md section 7 and holds them against the
theory of ``fvnum`` and ``fvsym``. Import submodules explicitly (``bridges.train`` etc.)."""
