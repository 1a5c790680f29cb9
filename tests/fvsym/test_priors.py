"""Priors (THEORY.md sections 5 and 6): exact moments against the 2^K atoms, path and leaf
conventions, validation."""
import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from fvsym import GaussianPrior, TreePrior
from fvsym import symbols as S
from fvsym.priors import node_depth

R = sp.Rational


def empirical_moments(tree: TreePrior):
    """Mean and covariance of theta, exactly, as the average over the 2^K equally likely atoms."""
    atoms = [tree.theta_vector(s) for s in tree.leaves()]
    mean = sum(atoms, sp.zeros(tree.n_nodes, 1)) / len(atoms)
    cov = sum((a * a.T for a in atoms), sp.zeros(tree.n_nodes, tree.n_nodes)) / len(atoms)
    return mean, cov


def test_second_moment_sanity_value():
    assert TreePrior(4, "1/2").second_moment == R(15, 8)


@pytest.mark.parametrize("depth", [1, 2, 3, 5])
def test_second_moment_closed_form(depth):
    a, K = S.alpha, depth
    assert sp.simplify(TreePrior(depth).second_moment - (1 - a**K) / (1 - a)) == 0


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_covariance_equals_average_over_atoms_symbolic_alpha(depth):
    tree = TreePrior(depth)
    mean, cov = empirical_moments(tree)
    assert mean == tree.mean == sp.zeros(tree.n_nodes, 1)
    assert (cov - tree.covariance).applyfunc(sp.simplify).is_zero_matrix
    for n in range(1, tree.n_nodes + 1):
        k = node_depth(n)
        assert sp.simplify(tree.covariance[n - 1, n - 1] - tree.scales[k - 1] ** 2 / 2 ** (k - 1)) == 0
    assert sp.simplify(cov.trace() - tree.second_moment) == 0


def test_covariance_equals_average_over_atoms_explicit_scales_and_rational_alpha():
    for tree in (TreePrior(3, scales=(2, 1, R(1, 3))), TreePrior(4, "1/2")):
        mean, cov = empirical_moments(tree)
        assert mean.is_zero_matrix and cov == tree.covariance
        assert cov.trace() == tree.second_moment


def test_matched_gaussian_has_the_tree_covariance():
    tree = TreePrior(3, "1/3")
    g = GaussianPrior.matched(tree)
    assert g.cov == tree.covariance and g.dim == tree.n_nodes == 7
    assert g.second_moment == tree.second_moment
    assert list(g.eigenvalues) == sorted(g.eigenvalues, reverse=True)


@given(depth=st.integers(1, 8), data=st.data())
def test_leaf_index_and_path_conventions(depth, data):
    tree = TreePrior(depth, "1/2")
    index = data.draw(st.integers(0, tree.n_leaves - 1))
    signs = tree.leaf_signs(index)
    assert tree.leaf_index(signs) == index
    for k, s in enumerate(signs):  # k-th most significant bit is 1 iff s_k = -1
        assert ((index >> (depth - 1 - k)) & 1) == (1 if s == -1 else 0)
    nodes = tree.path(signs)
    assert nodes[0] == 1
    for k in range(depth - 1):
        assert nodes[k + 1] == 2 * nodes[k] + (0 if signs[k] == 1 else 1)
    assert [node_depth(n) for n in nodes] == list(range(1, depth + 1))
    # the heap path spells the leaf index: n_K = 2^(K-1) + floor(index / 2)
    assert nodes[-1] == 2 ** (depth - 1) + index // 2
    theta = tree.theta_vector(signs)
    assert {n: theta[n - 1] for n in range(1, tree.n_nodes + 1) if theta[n - 1] != 0} == tree.theta(signs)
    assert all(theta[n - 1] == tree.scales[k] * signs[k] for k, n in enumerate(nodes))


def test_every_node_is_visited_by_its_share_of_leaves():
    tree = TreePrior(4, "1/2")
    visits = {}
    for s in tree.leaves():
        for n in tree.path(s):
            visits[n] = visits.get(n, 0) + 1
    assert set(visits) == set(range(1, tree.n_nodes + 1))
    assert all(v == tree.n_leaves // 2 ** (node_depth(n) - 1) for n, v in visits.items())


def test_leaf_zero_is_the_all_plus_path():
    tree = TreePrior(3, "1/2")
    assert tree.leaf_signs(0) == (1, 1, 1) and tree.path((1, 1, 1)) == (1, 2, 4)
    assert tree.leaf_signs(tree.n_leaves - 1) == (-1, -1, -1) and tree.path((-1, -1, -1)) == (1, 3, 7)


def test_gaussian_prior_eigenvalues_are_largest_first_and_exact():
    g = GaussianPrior([[2, 1, 1, 0], [1, 3, 0, 1], [1, 0, 1, 1], [0, 1, 1, 5]])
    ev = [float(e) for e in g.eigenvalues]
    reference = np.linalg.eigvalsh(np.array(g.cov, dtype=float))[::-1]
    assert ev == pytest.approx(list(reference), rel=1e-12)  # exact values, largest first


# --- validation ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((3, "3/2"), {}, "alpha must lie in \\(0, 1\\), got 3/2"),
        ((3, 0), {}, "alpha must lie in \\(0, 1\\), got 0"),
        ((3, 1), {}, "alpha must lie in \\(0, 1\\), got 1"),
        ((3, "-0.5"), {}, "alpha must lie in \\(0, 1\\)"),
        ((3, "half"), {}, "alpha must be a number"),
        ((0, "1/2"), {}, "depth must be >= 1, got 0"),
        ((31, "1/2"), {}, "depth must be <= 30"),
        ((2.5, "1/2"), {}, "depth must be an integer, got 2.5"),
        ((3,), {"scales": (1, 2, 3)}, "non-increasing"),
        ((3,), {"scales": (1, 1)}, "3 entries, got 2"),
        ((2,), {"scales": (1, -1)}, "scales must be > 0, got a_2 = -1"),
    ],
)
def test_tree_prior_rejects_bad_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match) as info:
        TreePrior(*args, **kwargs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "cov, match",
    [
        ([[1, 2], [2, 1]], "not PSD: smallest eigenvalue -1"),
        ([[1, 2, 0], [2, 1, 1], [0, 1, 3]], "not PSD"),
        (sp.diag(1, -2, 3), "not PSD: diagonal entry 1 is -2"),
        ([[1, 0], [1, 1]], "symmetric"),
        ([[1, 0, 0], [0, 1, 0]], "square"),
    ],
)
def test_gaussian_prior_rejects_bad_covariance(cov, match):
    with pytest.raises(ValueError, match=match) as info:
        GaussianPrior(cov)
    assert "\n" not in str(info.value)


def test_structure_rejects_bad_nodes_and_leaves():
    tree = TreePrior(3, "1/2")
    with pytest.raises(ValueError, match="node must be <= 7, got 8"):
        tree.variance(8)
    with pytest.raises(ValueError, match="node numbers start at 1, got 0"):
        node_depth(0)
    with pytest.raises(ValueError, match="leaf index must be <= 7"):
        tree.leaf_signs(8)
    with pytest.raises(ValueError, match="a leaf is 3 signs"):
        tree.path((1, 0, 1))
    with pytest.raises(ValueError, match="dim must be >= 1"):
        GaussianPrior.isotropic(0)
    with pytest.raises(ValueError, match="explicit scales"):
        TreePrior(2, scales=(1, 1)).with_alpha("1/2")
    assert TreePrior(3).with_alpha("1/2") == tree


# --- the one rule for floats (docs/numbers.md) and 0-d arrays / tensors (issue 32) ---------------------------
def test_sympy_floats_are_exact_by_the_one_rule():
    import sympy as sp

    from fvsym.tree import tree_loss

    prior = TreePrior(4, sp.Float(0.5))
    assert prior == TreePrior(4, "1/2") and prior.alpha == sp.Rational(1, 2)
    assert tree_loss(4, 2, "path", alpha=sp.Float(0.5)).expr == sp.Rational(3, 8)
    assert TreePrior(4, sp.Float("0.1", 30)).alpha == sp.Rational(1, 10)
    assert TreePrior(3, scales=[1, sp.Float(0.5), sp.Float(0.25)]).scales == (1, sp.Rational(1, 2), sp.Rational(1, 4))


def test_every_float_kind_follows_the_same_rule():
    import numpy as np
    import sympy as sp

    from fvsym._validate import check_real, to_exact

    kinds = [0.1, np.float64(0.1), np.float32(0.1), np.float16(0.1), np.longdouble("0.1"), sp.Float(0.1),
             np.array(0.1), np.array(0.1, dtype=np.float32)]
    for value in kinds:
        assert to_exact(value, "x") == sp.Rational(1, 10), type(value)
        assert check_real(value, "x") == 0.1, type(value)
    assert to_exact(np.float32(1 / 3), "x") == sp.Rational(33333334, 10**8)  # its shortest decimal as a float32
    assert to_exact(1 / 3, "x") == sp.Rational(3333333333333333, 10**16)


def test_torch_scalars_duck_typed_without_importing_torch_in_fvsym():
    torch = pytest.importorskip("torch")
    import sympy as sp

    from fvsym._validate import check_int, check_real, to_exact

    assert TreePrior(4, torch.tensor(0.5)) == TreePrior(4, "1/2")
    assert TreePrior(torch.tensor(4), "1/2").depth == 4
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        assert to_exact(torch.tensor(0.1, dtype=dtype), "x") == sp.Rational(1, 10), dtype
        assert check_real(torch.tensor(0.1, dtype=dtype), "x") == 0.1, dtype
    assert check_int(torch.tensor(3), "n") == 3 and check_int(torch.tensor(3.0), "n") == 3
    for bad, fragment in [(torch.tensor([0.5, 0.25]), "shape \\(2,\\)"), (torch.tensor(True), "number"),
                          (torch.tensor(float("nan")), "finite"), (torch.tensor(2.0), "\\(0, 1\\)")]:
        with pytest.raises(ValueError, match=fragment):
            TreePrior(4, bad)
