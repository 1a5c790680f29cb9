"""benchmarks/paired.py, its logic only (no timing): the paired ratio and its verdict, the baseline
worktree removed whatever ends the block, a case the baseline lacks, and its options refused in one line."""
import importlib.util
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load():
    spec = importlib.util.spec_from_file_location("paired", ROOT / "benchmarks" / "paired.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


paired = load()


def test_ratio_is_of_the_medians_with_the_per_pair_spread_and_verdict():
    r = paired.paired_ratio([1.0, 2.0, 4.0], [1.5, 2.2, 3.0])
    assert r["baseline_s"] == 2.0 and r["current_s"] == 2.2
    assert r["ratio"] == pytest.approx(1.1) and r["within"] and r["verdict"] == "within 10%"
    assert r["pair_ratios"] == pytest.approx([1.5, 1.1, 0.75]) and r["spread"] == pytest.approx([0.75, 1.5])
    slow = paired.paired_ratio([1.0, 1.0], [1.2, 1.3])
    assert slow["ratio"] == pytest.approx(1.25) and not slow["within"]
    assert slow["verdict"] == "25% slower: not within 10%"
    assert paired.paired_ratio([2.0], [1.0])["verdict"] == "within 10%"  # faster is within


@pytest.mark.parametrize("base, cur", [([1.0], [1.0, 2.0]), ([], []), ([1.0], [0.0]), ([float("nan")], [1.0])])
def test_ratio_refuses_unpaired_or_non_positive_timings(base, cur):
    with pytest.raises(ValueError):
        paired.paired_ratio(base, cur)


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = lambda *a: subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *a], cwd=repo, check=True,
                                    capture_output=True)
    git("init", "-q")
    (repo / "f.txt").write_text("old\n")
    git("add", "f.txt")
    git("commit", "-q", "-m", "old")
    (repo / "f.txt").write_text("new\n")
    git("commit", "-q", "-am", "new")
    return repo


def _worktrees(repo: Path) -> int:
    out = subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=repo, capture_output=True, text=True)
    return out.stdout.count("worktree ")


@pytest.mark.parametrize("ending", [None, KeyboardInterrupt, RuntimeError])
def test_baseline_worktree_holds_the_old_commit_and_is_removed_however_the_block_ends(tmp_path, ending):
    repo = _repo(tmp_path)
    seen = []
    try:
        with paired.baseline_worktree("HEAD~1", repo=repo, folder=tmp_path) as path:
            seen.append(path)
            assert (path / "f.txt").read_text() == "old\n" and _worktrees(repo) == 2
            if ending:
                raise ending
    except (KeyboardInterrupt, RuntimeError) as err:
        assert type(err) is ending
    assert not seen[0].exists() and not seen[0].parent.exists() and _worktrees(repo) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo"]


def test_a_case_the_baseline_lacks_is_timed_in_the_current_checkout_alone():
    absent = {"absent": "no fvnum.priors.atoms in this checkout"}
    runs = {"baseline": [absent, absent], "current": [{"first": 3.0, "best": 0.5, "value": 1.0},
                                                      {"first": 1.0, "best": 0.7, "value": 1.0}]}
    row = paired.summarise("atoms", runs)
    assert row["current_s"] == pytest.approx(0.6) and "ratio" not in row and row["note"] == absent["absent"]
    assert row["current_first_s"] == 3.0 and row["current_warmup_s"] == 1.0
    both = paired.summarise("path", {"baseline": [{"first": 2.0, "best": 1.0, "value": 0.25}],
                                     "current": [{"first": 2.0, "best": 1.05, "value": 0.25}]})
    assert both["ratio"] == pytest.approx(1.05) and both["same_value"] and both["within"]


@pytest.mark.parametrize("argv, named", [(["--pairs=0"], "'0'"), (["--pairs=x"], "'x'"), (["--pair=3"], "pair"),
                                         (["5"], "'5'"), (["--out=/no/such/folder"], "/no/such/folder"),
                                         (["--baseline=no-such-rev", "--no-suite"], "no-such-rev")])
def test_bad_options_are_one_line_and_exit_2(argv, named, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        paired.main(argv + ([f"--out={tmp_path}"] if "--out" not in argv[0] else []))
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.strip().splitlines()) == 1 and named in err
    assert list(tmp_path.iterdir()) == []


def test_the_table_has_a_row_per_case_and_the_verdict():
    rows = [paired.summarise("path", {"baseline": [{"first": 2.0, "best": 1.0, "value": 0.25}],
                                      "current": [{"first": 2.0, "best": 1.2, "value": 0.25}]})]
    result = dict(cases=rows, suite=None, current_commit="a" * 40, baseline_commit="b" * 40, date="2026-12-03",
                  pairs=1, quick=True, cores=2, load_before=1.0, load_after=2.0, verdict="not within 10%: path")
    text = paired.markdown(result)
    assert "| path | 1 | 1.2 | 1.200 | 1.200-1.200 | 20% slower: not within 10% | 2, 2 | yes |" in text
    assert text.rstrip().endswith("Verdict: not within 10%: path.")


def test_the_suite_is_timed_pair_by_pair_in_each_tree_with_its_exit_codes(tmp_path, monkeypatch):
    import sys

    trees = {k: tmp_path / k for k in ("baseline", "current")}
    for k, tree in trees.items():
        tree.mkdir()
        (tree / "mark.py").write_text(f"WHO = {k!r}\n")
    # a stand-in for pytest: says which tree it ran in (PYTHONPATH) and fails in the baseline
    monkeypatch.setattr(paired, "SUITE", [sys.executable, "-c", "import mark; print('1 passed', mark.WHO); "
                                          "raise SystemExit(mark.WHO == 'baseline')"])
    monkeypatch.setattr(paired, "CASES", [])
    result = paired.measure(trees["baseline"], trees["current"], tmp_path, 3, True, True)
    row = result["suite"]
    assert result["cases"] == [] and row["exit_codes"] == {"baseline": [1, 1, 1], "current": [0, 0, 0]}
    assert [r["summary"] for r in row["runs"]["current"]] == ["1 passed current"] * 3
    assert len(row["pair_ratios"]) == 3 and row["ratio"] > 0 and "same_value" not in row
    text = paired.markdown(dict(result, current_commit="a" * 40, baseline_commit="b" * 40, date="2026-12-03",
                                pairs=3, quick=True, cores=2, load_before=1.0, load_after=1.0, verdict="x"))
    assert "Suite exit codes {'baseline': [1, 1, 1], 'current': [0, 0, 0]}" in text and "`1 passed current`" in text


def test_shared_tests_sums_only_the_tests_both_checkouts_hold(tmp_path):
    def report(name, cases):
        body = "".join(f'<testcase classname="{c}" name="{n}" time="{t}">{"<skipped/>" if s else ""}</testcase>'
                       for c, n, t, s in cases)
        path = tmp_path / name
        path.write_text(f'<testsuites><testsuite name="pytest">{body}</testsuite></testsuites>')
        return paired.junit_times(path)

    base = report("b.xml", [("t.a", "x", 1.0, False), ("t.a", "y", 2.0, False), ("t.a", "s", 5.0, True)])
    cur = report("c.xml", [("t.a", "x", 1.5, False), ("t.a", "y", 2.5, False), ("t.new", "z", 9.0, False)])
    row = paired.shared_tests({"baseline": [base], "current": [cur]})
    assert row["n_tests"] == 2  # the new test and the skipped one are left out
    assert (row["baseline_s"], row["current_s"]) == (3.0, 4.0)
    assert row["ratio"] == 4.0 / 3.0 and not row["within"]
    assert paired.junit_times(tmp_path / "missing.xml") == {}
    assert paired.shared_tests({"baseline": [{}], "current": [cur]}) is None
