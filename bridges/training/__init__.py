"""Training: the loop, data, checkpoints, distillation starts."""
