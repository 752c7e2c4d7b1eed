"""A small schema language for peers' values, with errors that say where.

A spec is a Python type (``int`` never accepts ``bool``; ``float`` accepts ``int``),
``None``, or one of :class:`OneOf`, :class:`ListOf`, :class:`MapOf`, :class:`Record`,
:class:`Choice`. Failures are :class:`~envlock.exchange.codec.BadValue`-compatible
``ValueError`` s naming the dotted path, as pypa/packaging's pylock validation does:

>>> validate({"world": 5}, Record({"world": Record({"host": str})}))
Traceback (most recent call last):
...
envlock.exchange.schema.SchemaError: 'world': expected an object, got int
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Tuple, Union

__all__ = ["Spec", "OneOf", "ListOf", "MapOf", "Record", "Choice", "SchemaError", "validate"]


class SchemaError(ValueError):
    """A value that does not fit its spec."""


@dataclass(frozen=True)
class OneOf:
    options: Tuple["Spec", ...]

    def __init__(self, *options: "Spec") -> None:
        object.__setattr__(self, "options", options)


@dataclass(frozen=True)
class ListOf:
    item: "Spec"
    most: int = 4096


@dataclass(frozen=True)
class MapOf:
    """An object with string keys, each value of one spec."""

    value: "Spec"
    most: int = 256


@dataclass(frozen=True)
class Record:
    """An object with these keys (others are ignored: a newer peer may add some)."""

    required: Mapping[str, "Spec"]
    optional: Mapping[str, "Spec"] = field(default_factory=dict)


@dataclass(frozen=True)
class Choice:
    """One of a closed set of strings."""

    values: Tuple[str, ...]


Spec = Union[type, None, OneOf, ListOf, MapOf, Record, Choice]

_NAMES = {dict: "an object", list: "a list", str: "a string", int: "an integer",
          float: "a number", bool: "true or false", type(None): "null"}


def _name(value: Any) -> str:
    return type(value).__name__ if not isinstance(value, (dict, list)) else \
        ("object" if isinstance(value, dict) else "list")


def _where(path: str) -> str:
    return repr(path) if path else "the value"


def _fits(value: Any, spec: "Spec") -> bool:
    try:
        validate(value, spec)
    except SchemaError:
        return False
    return True


def validate(value: Any, spec: "Spec", path: str = "") -> None:
    """Raise :class:`SchemaError` naming the first place ``value`` does not fit ``spec``."""
    if spec is None:
        if value is not None:
            raise SchemaError(f"{_where(path)}: expected null, got {_name(value)}")
    elif isinstance(spec, type):
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool)) \
            if spec is float else isinstance(value, spec) and \
            not (spec is int and isinstance(value, bool))
        if not ok:
            raise SchemaError(f"{_where(path)}: expected {_NAMES.get(spec, spec.__name__)}, "
                              f"got {_name(value)}")
    elif isinstance(spec, OneOf):
        if not any(_fits(value, s) for s in spec.options):
            for s in spec.options:  # the error of the option of the same shape, if any
                if s is not None and isinstance(s, (Record, MapOf)) and isinstance(value, dict):
                    validate(value, s, path)
            raise SchemaError(f"{_where(path)}: unexpected {_name(value)}")
    elif isinstance(spec, Choice):
        if value not in spec.values:
            raise SchemaError(f"{_where(path)}: {str(value)[:40]!r} is not one of "
                              f"{', '.join(spec.values)}")
    elif isinstance(spec, ListOf):
        if not isinstance(value, list):
            raise SchemaError(f"{_where(path)}: expected a list, got {_name(value)}")
        if len(value) > spec.most:
            raise SchemaError(f"{_where(path)}: {len(value)} items, more than {spec.most}")
        for i, item in enumerate(value):
            validate(item, spec.item, f"{path}[{i}]")
    elif isinstance(spec, MapOf):
        if not isinstance(value, dict):
            raise SchemaError(f"{_where(path)}: expected an object, got {_name(value)}")
        if len(value) > spec.most:
            raise SchemaError(f"{_where(path)}: {len(value)} keys, more than {spec.most}")
        for k, v in value.items():
            validate(v, spec.value, f"{path}.{k}" if path else k)
    elif isinstance(spec, Record):
        if not isinstance(value, dict):
            raise SchemaError(f"{_where(path)}: expected an object, got {_name(value)}")
        for k, s in spec.required.items():
            if k not in value:
                raise SchemaError(f"{_where(path)}: no key {k!r}")
            validate(value[k], s, f"{path}.{k}" if path else k)
        for k, s in spec.optional.items():
            if k in value:
                validate(value[k], s, f"{path}.{k}" if path else k)
    else:  # pragma: no cover - a spec is code, not input
        raise TypeError(f"not a spec: {spec!r}")
