"""Training: the loop, data, checkpoints, distillation starts."""
from bridges.errors import require

require(__name__)  # this room needs torch: without it, one line naming the extra

