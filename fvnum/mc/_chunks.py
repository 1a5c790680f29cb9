"""Seeded, blocked, threaded execution.

Random numbers come in *blocks* of samples: block ``i`` draws from
``SeedSequence(seed, spawn_key=(purpose,)).spawn(n_blocks)[i]``, and the block size depends only on
what the problem draws per sample (the latent, the channel noise, the tokens statistic), never on the
strategy or the thread count. So the same seed gives the same latents and noise to every strategy of
the same budget (common random numbers) and the same numbers on any number of threads.
Work runs in *chunks* of whole blocks, sized by the strategy's own memory per sample; chunks run on a
thread pool (the Numba kernels release the GIL) and their results are combined in chunk order. Memory
stays bounded by a few chunks per thread, whatever the number of samples.
"""
from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

MIN_BLOCK, MAX_BLOCK = 256, 4096
MAX_CHUNK = 16384
BLOCK_FLOATS = 2**20  # ~8 MiB of random draws per block
CHUNK_FLOATS = 2**22  # ~32 MiB of work arrays per chunk

# purposes: independent random streams derived from one user seed
EVAL, SEARCH, SELECT, DONOR, MEAN, INJECT = 0, 1, 2, 3, 4, 5  # DONOR + 16 j: divergence depth j


def default_threads() -> int:
    env = os.environ.get("FVNUM_THREADS")
    if env:
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover (not Linux)
        return max(1, os.cpu_count() or 1)


def check_threads(threads) -> int | None:
    """``threads`` (None: all cores) if it is an integer in 1 .. max(8, 4 x the cores); else a one-line InputError."""
    from fvsym._validate import check_int

    if threads is None:
        return None
    return check_int(threads, "threads", minimum=1, maximum=max(8, 4 * default_threads()))


def _pow2(x: int) -> int:
    return 1 << (max(1, int(x)).bit_length() - 1)


def block_size(draw_floats: int) -> int:
    """Samples per random block: a power of two in [256, 4096], about BLOCK_FLOATS floats of draws."""
    return _pow2(max(MIN_BLOCK, min(MAX_BLOCK, BLOCK_FLOATS // max(1, int(draw_floats)))))


def chunk_size(work_floats: int, block: int) -> int:
    """Samples per chunk: whole blocks, about CHUNK_FLOATS floats of work, at most MAX_CHUNK."""
    return max(block, _pow2(min(MAX_CHUNK, CHUNK_FLOATS // max(1, int(work_floats)))))


def seed_sequence(seed: int, purpose: int = EVAL) -> np.random.SeedSequence:
    return np.random.SeedSequence(int(seed), spawn_key=(int(purpose),))


def run_chunks(fn, n_total: int, seed: int, *, block: int, chunk: int, purpose: int = EVAL, threads=None,
               progress=False):
    """``[fn(sizes, rngs) for each chunk]`` in chunk order: ``sizes`` and ``rngs`` list the chunk's blocks
    (sample counts and their generators). Runs on ``threads`` threads (default: all cores)."""
    n_blocks = -(-n_total // block)
    seqs = seed_sequence(seed, purpose).spawn(n_blocks)
    sizes = [block] * (n_blocks - 1) + [n_total - block * (n_blocks - 1)]
    per = max(1, chunk // block)
    groups = [range(i, min(i + per, n_blocks)) for i in range(0, n_blocks, per)]
    threads = default_threads() if threads is None else max(1, int(threads))
    bar = _bar(n_total, progress)

    def task(group):
        out = fn([sizes[b] for b in group], [np.random.default_rng(seqs[b]) for b in group])
        if bar is not None:
            bar.update(sum(sizes[b] for b in group))
        return out

    try:
        if threads == 1 or len(groups) == 1:
            return [task(g) for g in groups]
        with ThreadPoolExecutor(max_workers=min(threads, len(groups))) as ex:
            return list(ex.map(task, groups))
    finally:
        if bar is not None:
            bar.close()


def _bar(total: int, progress):
    """A tqdm bar on stderr: when asked (``progress=True``), or with ``progress=None`` when stderr is a TTY."""
    if progress is None:
        progress = sys.stderr.isatty()
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="samples", unit_scale=True, file=sys.stderr, leave=False)
