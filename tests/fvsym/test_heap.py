"""fvsym.heap, the one text of the heap-path rule: it gives TreePrior's paths, leaf indices and signs on every
leaf, and the same numbers elementwise on numpy arrays, on torch tensors and compiled by Numba (the kernels)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from fvsym import TreePrior, heap


@pytest.mark.parametrize("K", [1, 2, 3, 5])
def test_child_and_path_node_walk_the_path_of_every_leaf(K):
    prior = TreePrior(K, "1/2")
    for index, signs in enumerate(itertools.product((1, -1), repeat=K)):
        assert prior.leaf_signs(index) == signs and prior.leaf_index(signs) == index  # leaves in index order
        n, path = 1, []
        for s in signs:
            path.append(n)
            n = heap.child(n, s)
        assert tuple(path) == prior.path(signs)
        assert n == 2**K + index  # the leaf as heap node 2^K + i
        assert [heap.path_node(index, K, k) for k in range(1, K + 1)] == path
        assert [1 - 2 * heap.leaf_bit(index, K, k) for k in range(1, K + 1)] == list(signs)
        assert all(heap.path_node(index, K, k) // 2 == heap.path_node(index, K, k - 1) for k in range(2, K + 1))


def test_a_reading_routes_by_its_sign_and_a_tie_counts_as_plus():
    assert [heap.child(3, x) for x in (0.7, -0.7, 0.0, -0.0, 1, -1)] == [6, 7, 6, 6, 6, 7]
    assert [heap.sign(x) for x in (0.7, -0.7, 0.0, -0.0)] == [1, -1, 1, 1]


def _cases():
    rng = np.random.default_rng(0)
    K = 6
    leaves = rng.integers(0, 2**K, size=200)
    nodes = rng.integers(1, 2**K, size=200)
    readings = rng.normal(size=200)
    readings[:5] = 0.0
    return K, leaves, nodes, readings


def test_numpy_arrays_give_the_int_answers_elementwise():
    K, leaves, nodes, readings = _cases()
    k = np.arange(1, K + 1)
    assert (heap.path_node(leaves[:, None], K, k) == [[heap.path_node(int(i), K, j) for j in k] for i in leaves]).all()
    assert (heap.leaf_bit(leaves[:, None], K, k) == [[heap.leaf_bit(int(i), K, j) for j in k] for i in leaves]).all()
    assert (heap.child(nodes, readings) == [heap.child(int(n), float(r)) for n, r in zip(nodes, readings)]).all()
    assert heap.child(nodes, readings).dtype == np.int64
    assert (heap.sign(readings) == np.where(readings < 0, -1, 1)).all()


def test_torch_tensors_give_the_int_answers_elementwise():
    import torch

    K, leaves, nodes, readings = _cases()
    t_nodes, t_readings = torch.as_tensor(nodes), torch.as_tensor(readings, dtype=torch.float32)
    assert heap.child(t_nodes, t_readings).tolist() == [heap.child(int(n), float(r)) for n, r in zip(nodes, readings)]
    assert heap.child(t_nodes, t_readings).dtype == torch.long
    assert heap.sign(t_readings).tolist() == [1 if r >= 0 else -1 for r in readings.astype(np.float32)]
    k = torch.arange(1, K + 1)
    assert (heap.path_node(torch.as_tensor(leaves)[:, None], K, k).numpy() == heap.path_node(leaves[:, None], K,
                                                                                              np.arange(1, K + 1))).all()


def test_the_kernels_compile_the_same_functions():
    from fvnum.priors import _kernels

    K, leaves, nodes, readings = _cases()
    assert _kernels._child.py_func is heap.child and _kernels._path_node.py_func is heap.path_node
    assert [_kernels._child(int(n), float(r)) for n, r in zip(nodes, readings)] == heap.child(nodes, readings).tolist()
    for i in leaves[:20]:
        for k in range(1, K + 1):
            assert _kernels._path_node(int(i), K, k) == heap.path_node(int(i), K, k)
            assert _kernels._leaf_bit(int(i), K, k) == heap.leaf_bit(int(i), K, k)
