"""What the typed results of ``bridges`` share: each is a frozen dataclass with ``to_dict()`` (its JSON layout,
the one the run store and ``fv ... --format json`` write) and ``to_frame()`` (its rows as a pandas DataFrame),
and reads as the dict it replaced (``r["fits"]``, ``"audit" in r``, ``r.get(...)``, ``r.keys()``), so callers of
the earlier dicts keep working. Standard library only."""
from __future__ import annotations


class DictLayout:
    """A typed result read as its ``to_dict()`` layout."""

    def to_dict(self) -> dict:  # pragma: no cover - every result gives its own
        raise NotImplementedError(f"{type(self).__name__} must define to_dict(), its JSON layout")

    def __getitem__(self, name: str):
        return self.to_dict()[name]

    def __contains__(self, name) -> bool:
        return name in self.to_dict()

    def get(self, name: str, default=None):
        return self.to_dict().get(name, default)

    def keys(self):
        return self.to_dict().keys()


def frame_of(tables: dict, which: str, what: str):
    """``to_frame(which)`` of a result holding several tables of rows (``tables``: name -> list of dicts): the
    rows of ``which`` as a DataFrame, or one line naming the tables it holds."""
    if which not in tables:
        from fvsym.errors import InputError

        raise InputError(f"{what} holds the tables {', '.join(map(repr, tables))}; got {which!r}")
    from fvnum.estimate import to_frame

    return to_frame(tables[which], what)


__all__ = ["DictLayout", "frame_of"]
