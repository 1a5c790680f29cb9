"""The noisy Bellman optimum: the exact recursion on small trees and finite priors, its bracket."""
