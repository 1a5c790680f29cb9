"""The optional dependencies of ``bridges`` (torch, Dask): the one line that names a missing one and its extra
(:func:`missing_extra`), and a room's refusal to import without it (:func:`require`). The typed errors themselves
are :mod:`fvsym.errors`."""
__all__ = ["missing_extra", "require"]

# the optional dependencies (pyproject.toml's extras) by the module a missing one leaves unimportable
EXTRAS = {"torch": "torch", "dask": "dask", "distributed": "dask"}


def missing_extra(exc: BaseException) -> str | None:
    """One line for an ``ImportError`` of an optional dependency (torch, Dask): what is missing and the extra that
    installs it; ``None`` when ``exc`` is about anything else."""
    name = (getattr(exc, "name", None) or "").split(".")[0]
    if not isinstance(exc, ImportError) or name not in EXTRAS:
        return None
    extra = EXTRAS[name]
    return (f"this needs {name}, which is not installed: pip install 'fvtheory[{extra}]' "
            f"(in a checkout: pip install -c constraints.txt -e '.[{extra}]')")



def require(where: str, dependency: str = "torch") -> None:
    """Refuse, in one line naming the extra, to import ``where`` (a room of ``bridges`` that needs ``dependency``)
    when that optional dependency is not installed: ``ModuleNotFoundError`` (its ``name`` the dependency)."""
    from importlib.util import find_spec

    try:
        found = find_spec(dependency) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        line = missing_extra(ModuleNotFoundError(name=dependency))
        raise ModuleNotFoundError(f"{where}: {line}", name=dependency)
