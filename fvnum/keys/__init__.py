"""Key families, their reading laws, and the keyed theory rows (one-layer designs, adaptive searches).

The room's public names: the key families (``fvnum.keys.families``) and the reading laws and their decoder
(``fvnum.keys.readings``); the searches are in ``fvnum.keys.nonadaptive``, ``fvnum.keys.adaptive`` and
``fvnum.keys.tree``."""
from fvnum.keys.readings import (ReadingLaw, finite_n_terms, law_from_key_values, law_from_scores, log_likelihoods,
                                 law_posterior_mean, posterior_weights, softmax_law)
from fvnum.keys.families import (FAMILIES, KeyFamily, LearnedKeys, LinearKeys, SoftmaxKeys, WeightedKeys,
                                 check_family)

__all__ = ["FAMILIES", "KeyFamily", "LearnedKeys", "LinearKeys", "ReadingLaw", "SoftmaxKeys", "WeightedKeys",
           "check_family", "finite_n_terms", "law_from_key_values", "law_from_scores", "log_likelihoods",
           "law_posterior_mean", "posterior_weights", "softmax_law"]
