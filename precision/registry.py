"""One pattern for what a suite names: a spec class per kind (solver, construction, study;
``kind`` and ``error`` on the class) and one :class:`Registry` of its specs by name. Specs
whose parameters are declared as :class:`~precision.params.Param` are :class:`Declared`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, Generic, NoReturn, TypeVar

from precision.params import Param, ParamError, check_params

S = TypeVar("S")


class Registry(dict[str, S], Generic[S]):
    """The specs of class ``cls`` by name: a dict whose ``registry[name]`` of an unknown name
    raises ``cls.error``: "unknown <cls.kind> '<name>'" and the names formatted by ``listing``."""

    def __init__(self, cls: type[S], specs: Iterable[S] = (),
                 listing: str = "; choose from: {}") -> None:
        super().__init__()
        self.kind, self.error, self.listing = cls.kind, cls.error, listing  # type: ignore
        for spec in specs:
            self.register(spec)

    def register(self, spec: S) -> S:
        """Add ``spec`` under its ``name``; RuntimeError if another spec has that name."""
        name = spec.name  # type: ignore[attr-defined]
        if name in self and self[name] != spec:
            raise RuntimeError(f"{self.kind} '{name}' registered twice")
        self[name] = spec
        return spec

    def __missing__(self, name: str) -> NoReturn:
        raise self.error(f"unknown {self.kind} '{name}'"
                         + self.listing.format(", ".join(self.names()) or "none"))

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self)


class Declared:
    """Mixin of a spec whose parameters are declared (``params``: name -> Param)."""

    kind: ClassVar[str]
    error: ClassVar[type[Exception]]
    name: str
    params: dict[str, Param]

    @property
    def defaults(self) -> dict[str, Any]:
        """Default value of every parameter."""
        return {k: p.default for k, p in self.params.items()}

    def resolve(self, given: dict[str, Any] | None) -> dict[str, Any]:
        """Defaults overlaid with ``given``; an unknown name or a value of the wrong type or
        range is the kind's ``error``, raised before anything is computed."""
        try:
            return check_params(f"{self.kind} '{self.name}'", self.params,
                                {} if given is None else given)
        except ParamError as exc:
            raise self.error(str(exc)) from None
