"""Interventions on trained models: key patching (docs/theory.md section 8: ``bridges.patching.keys``), state
transplant and injection (9b: ``bridges.patching.state``), additive steering (9: ``bridges.patching.steering``).
The room's public names are the interventions' verbs below."""
from bridges.errors import require

require(__name__)  # this room needs torch: without it, one line naming the extra

from bridges.patching.keys import (key_patching_table, paired_table, path_bayes_decoder, patched_losses,  # noqa: E402
                                   table_from_dict, theory_patching_table, unpatched_losses)
from bridges.patching.state import (model_injection_table, model_mean_state, model_state_patching_table,  # noqa: E402
                                    transplanted_losses)
from bridges.patching.steering import steering_table  # noqa: E402

__all__ = ["key_patching_table", "model_injection_table", "model_mean_state", "model_state_patching_table",
           "paired_table", "path_bayes_decoder", "patched_losses", "steering_table", "table_from_dict",
           "theory_patching_table", "transplanted_losses", "unpatched_losses"]
