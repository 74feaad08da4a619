"""One pattern for what a suite names: a spec class per kind (solver, construction, study;
``kind`` and ``error`` on the class) and one :class:`Registry` of its specs by name. Specs
whose parameters are declared as :class:`~precision.params.Param` are :class:`Declared`;
what ``precision list`` shows of a spec is :class:`Listed`, declared in a light catalog module
apart from the implementation, against which its registry checks every name it registers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, NoReturn, TypeVar

from precision.params import Param, ParamError, check_params

S = TypeVar("S")


@dataclass(frozen=True)
class Listed:
    """What ``precision list`` shows of one spec: the task family it solves and one line of
    description (a catalog maps names to these, importing nothing heavy)."""

    task: str
    description: str


class Registry(dict[str, S], Generic[S]):
    """The specs of class ``cls`` by name: a dict whose ``registry[name]`` of an unknown name
    raises ``cls.error``: "unknown <cls.kind> '<name>'" and the names formatted by ``listing``.
    With a catalog ``declared`` (name -> what the listing shows), only its names register."""

    def __init__(self, cls: type[S], specs: Iterable[S] = (),
                 listing: str = "; choose from: {}",
                 declared: Mapping[str, object] | None = None) -> None:
        super().__init__()
        self.kind, self.error, self.listing = cls.kind, cls.error, listing  # type: ignore
        self.declared = declared
        for spec in specs:
            self.register(spec)

    def register(self, spec: S) -> S:
        """Add ``spec`` under its ``name``; RuntimeError if another spec has that name, or if
        the registry has a catalog that does not declare it."""
        name = spec.name  # type: ignore[attr-defined]
        if self.declared is not None and name not in self.declared:
            raise RuntimeError(f"{self.kind} '{name}' is not declared in its catalog")
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
