"""The optimal policy of the Bellman recursion (docs/theory.md section 3) as a decision tree of
:class:`PolicyNode` layers, and :class:`BellmanSolution`, what :func:`fvsym.bellman.solve` returns
(loss, policy, how many belief states were solved)."""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp
from fvsym.errors import InputError

SOURCE = "docs/theory.md §3"


_SIGN_TEXT = {1: "+", -1: "-", 0: "0"}
REPR_LINES = 24  # lines of a decision tree shown by repr()


@dataclass(frozen=True)
class PolicyNode:
    """One layer of a policy: read ``nodes`` (real heap numbers for this belief), then follow
    ``children[readings]``, keyed by the reading sign of each read node (+1, -1 or 0, in the order of
    ``nodes``; only outcomes of positive probability). A child ``None`` means: nothing more to read
    (the layers are spent, or the belief is a single leaf). ``belief``: leaf indices still possible;
    ``value``: the expected terminal loss from here (exact)."""

    nodes: tuple[int, ...]
    children: dict
    belief: tuple[int, ...]
    value: sp.Expr

    def child(self, reading) -> "PolicyNode | None":
        """The policy after observing ``reading`` (one sign per read node)."""
        key = tuple(int(x) for x in reading)
        if key not in self.children:
            raise InputError(
                f"reading {key} of nodes {self.nodes} has probability zero here; possible: {sorted(self.children)}"
            )
        return self.children[key]

    def next_nodes(self, readings) -> tuple[int, ...]:
        """Nodes to read at the next layer after the per-layer sign tuples ``readings`` (``()`` when
        nothing is left to read)."""
        node: PolicyNode | None = self
        for layer, reading in enumerate(readings):
            if node is None:
                if tuple(reading):
                    raise InputError(f"layer {layer + 1} reads no node, got reading {tuple(reading)}")
                continue
            node = node.child(reading)
        return node.nodes if node is not None else ()

    def describe(self, indent: str = "  ") -> str:
        """Indented decision tree: ``read node 1`` then one line per outcome."""
        lines: list[str] = []

        def walk(node: PolicyNode, prefix: str, depth: int):
            what = "read node" + ("s " if len(node.nodes) > 1 else " ") + ", ".join(map(str, node.nodes))
            lines.append(
                f"{indent * depth}{prefix}{what}  [{len(node.belief)} leaves, expected loss {node.value}]"
            )
            for reading, child in node.children.items():
                signs = ",".join(_SIGN_TEXT[s] for s in reading)
                label = f"{signs}: " if len(reading) == 1 else f"({signs}): "
                if child is None:
                    lines.append(f"{indent * (depth + 1)}{label}stop")
                else:
                    walk(child, label, depth + 1)

        walk(self, "", 0)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()

    def __repr__(self) -> str:
        """The decision tree (cut after ``REPR_LINES`` lines; ``print(policy)`` shows all of it)."""
        lines = self.describe().splitlines()
        if len(lines) > REPR_LINES:
            lines = lines[:REPR_LINES] + [f"... ({len(lines) - REPR_LINES} more lines: print(policy) shows all)"]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """JSON-able form: values as exact strings plus floats, children as a list of outcomes."""
        return {
            "nodes": list(self.nodes),
            "belief": list(self.belief),
            "value": str(self.value),
            "value_float": float(self.value) if self.value.is_number else None,
            "children": [
                {"reading": list(reading), "next": None if child is None else child.to_dict()}
                for reading, child in self.children.items()
            ],
        }

    @property
    def n_policy_nodes(self) -> int:
        return 1 + sum(c.n_policy_nodes for c in self.children.values() if c is not None)


@dataclass(frozen=True)
class BellmanSolution:
    """Exact optimum ``loss`` of ``layers`` x ``width`` and its ``policy`` (``None`` when ``layers = 0``);
    ``n_states``: distinct memoised (canonical belief, layers left) states this solve visited."""

    loss: sp.Expr
    policy: PolicyNode | None
    layers: int
    width: int
    n_states: int

    def __repr__(self) -> str:
        head = (f"BellmanSolution(loss={self.loss}, layers={self.layers}, width={self.width}, "
                f"n_states={self.n_states})")
        return head + ("\npolicy: read nothing" if self.policy is None else "\npolicy:\n" + repr(self.policy))

    def to_dict(self) -> dict:
        return {"loss": sp.sstr(self.loss), "loss_float": float(self.loss) if self.loss.is_number else None,
                "layers": self.layers, "width": self.width, "n_states": self.n_states,
                "policy": None if self.policy is None else self.policy.to_dict()}


