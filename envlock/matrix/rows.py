"""Typed field access over raw TOML tables, collecting problems instead of raising.

The loader reads every row through a :class:`Row`; a wrong type or a missing key is
recorded as ``"gpus.toml: gpu[12].compute_capability: expected a string, got int"`` and a
safe default is returned, so one pass reports every problem in the data at once (a
curator fixes them all in one go).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, TypeVar

__all__ = ["Problems", "Row", "MISSING"]

T = TypeVar("T")
MISSING: Any = object()


class Problems:
    """An ordered list of ``file: path: message`` strings."""

    def __init__(self) -> None:
        self.items: List[str] = []

    def add(self, file: str, path: str, message: str) -> None:
        where = f"{file}: {path}" if path else file
        self.items.append(f"{where}: {message}")

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        return len(self.items)


def _type_name(value: Any) -> str:
    return {
        str: "string",
        int: "integer",
        float: "number",
        bool: "boolean",
        list: "array",
        dict: "table",
    }.get(type(value), type(value).__name__)


class Row:
    """One table of a data file, with its location for messages."""

    def __init__(self, file: str, path: str, data: Any, problems: Problems) -> None:
        self.file = file
        self.path = path
        self.problems = problems
        if not isinstance(data, dict):
            self.problem("", f"expected a table, got {_type_name(data)}")
            data = {}
        self.data: Dict[str, Any] = data
        self._seen: set = set()

    # -- reporting -------------------------------------------------------------------
    def where(self, key: str) -> str:
        return f"{self.path}.{key}" if key and self.path else (key or self.path)

    def problem(self, key: str, message: str) -> None:
        self.problems.add(self.file, self.where(key), message)

    # -- raw access ------------------------------------------------------------------
    def _get(self, key: str, required: bool) -> Any:
        self._seen.add(key)
        if key not in self.data:
            if required:
                self.problem(key, "missing required key")
            return MISSING
        return self.data[key]

    def child(self, key: str, value: Any) -> "Row":
        return Row(self.file, self.where(key), value, self.problems)

    # -- typed getters ---------------------------------------------------------------
    def text(self, key: str, default: str = "", *, check: Optional[Callable[[str], bool]] = None,
            what: str = "") -> str:
        value = self._get(key, True)
        return self._as_str(key, value, default, check, what)

    def opt_text(self, key: str, *, check: Optional[Callable[[str], bool]] = None,
                what: str = "") -> Optional[str]:
        value = self._get(key, False)
        if value is MISSING:
            return None
        return self._as_str(key, value, None, check, what)

    def _as_str(self, key: str, value: Any, default: Any, check: Any, what: str) -> Any:
        if value is MISSING:
            return default
        if not isinstance(value, str):
            self.problem(key, f"expected a string, got {_type_name(value)}")
            return default
        if check is not None and not check(value):
            self.problem(key, f"{value!r} is not {what or 'valid'}")
            return default
        return value

    def choice(self, key: str, choices: Sequence[str], default: Optional[str] = None,
               *, required: bool = True) -> Optional[str]:
        value = self._get(key, required)
        if value is MISSING:
            return default
        if not isinstance(value, str) or value not in choices:
            self.problem(key, f"{value!r} is not one of {', '.join(choices)}")
            return default
        return value

    def integer(self, key: str, *, required: bool = True) -> Optional[int]:
        value = self._get(key, required)
        if value is MISSING:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(key, f"expected an integer, got {_type_name(value)}")
            return None
        return value

    def number(self, key: str, *, required: bool = True) -> Optional[float]:
        value = self._get(key, required)
        if value is MISSING:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.problem(key, f"expected a number, got {_type_name(value)}")
            return None
        return float(value)

    def flag(self, key: str, default: bool = False) -> bool:
        value = self._get(key, False)
        if value is MISSING:
            return default
        if not isinstance(value, bool):
            self.problem(key, f"expected true or false, got {_type_name(value)}")
            return default
        return value

    def str_list(self, key: str, *, required: bool = False,
                 check: Optional[Callable[[str], bool]] = None, what: str = "",
                 allow_scalar: bool = False) -> Optional[Tuple[str, ...]]:
        """A list of strings; ``None`` when absent and not required."""
        value = self._get(key, required)
        if value is MISSING:
            return None if not required else ()
        if allow_scalar and isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            self.problem(key, f"expected an array of strings, got {_type_name(value)}")
            return ()
        out: List[str] = []
        for i, item in enumerate(value):
            if not isinstance(item, str):
                self.problem(f"{key}[{i}]", f"expected a string, got {_type_name(item)}")
                continue
            if check is not None and not check(item):
                self.problem(f"{key}[{i}]", f"{item!r} is not {what or 'valid'}")
                continue
            out.append(item)
        return tuple(out)

    def int_list(self, key: str, *, required: bool = False) -> Tuple[int, ...]:
        value = self._get(key, required)
        if value is MISSING:
            return ()
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            self.problem(key, "expected an array of integers")
            return ()
        return tuple(value)

    def str_map(self, key: str, *, check: Optional[Callable[[str], bool]] = None,
                what: str = "") -> Mapping[str, str]:
        value = self._get(key, False)
        if value is MISSING:
            return {}
        if not isinstance(value, dict):
            self.problem(key, f"expected a table, got {_type_name(value)}")
            return {}
        out: Dict[str, str] = {}
        for k, v in value.items():
            if not isinstance(v, str):
                self.problem(f"{key}.{k}", f"expected a string, got {_type_name(v)}")
            elif check is not None and not check(v):
                self.problem(f"{key}.{k}", f"{v!r} is not {what or 'valid'}")
            else:
                out[k] = v
        return out

    def raw(self, key: str) -> Any:
        value = self._get(key, False)
        return None if value is MISSING else value

    def table_list(self, key: str) -> List["Row"]:
        value = self._get(key, False)
        if value is MISSING:
            return []
        if not isinstance(value, list):
            self.problem(key, f"expected an array of tables, got {_type_name(value)}")
            return []
        return [self.child(f"{key}[{i}]", item) for i, item in enumerate(value)]

    def finish(self, allowed_extra: Sequence[str] = ()) -> None:
        """Report keys nobody read (typos), with a suggestion when one is close."""
        import difflib

        for key in self.data:
            if key in self._seen or key in allowed_extra:
                continue
            near = difflib.get_close_matches(key, sorted(self._seen), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            self.problem(key, f"unknown key{hint}")
