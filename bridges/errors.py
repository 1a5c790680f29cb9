"""The project's typed errors (defined once in :mod:`fvsym.errors`, the bottom layer; re-exported here so a
caller finds them beside the functions that raise them). All are ``ValueError``s."""
from fvsym.errors import DamagedFile, DomainError, InputError, ResourceRefused

__all__ = ["DamagedFile", "DomainError", "InputError", "ResourceRefused"]
