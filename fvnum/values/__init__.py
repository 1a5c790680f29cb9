"""Value families (docs/theory.md section 13): what the values of attention carry, the label (default) or the residual
of the state's estimate, with the readings and their law; and the row they give, ``gd_steps`` (L steps of
preconditioned gradient descent, ``fvnum.values.gd``)."""
