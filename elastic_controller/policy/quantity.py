"""Kubernetes resource quantities as integers.

cpu is held in millicores, every other resource in its base unit (bytes for memory), rounded up,
the way the scheduler compares requests against allocatable.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
            "P": Decimal("1e15"), "E": Decimal("1e18")}

Resources = dict[str, int]


class QuantityError(ValueError):
    """A quantity string that Kubernetes would not accept."""


def parse_quantity(value: object) -> Decimal:
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        return _number(str(value), value)  # rejects nan/inf (json.loads accepts NaN)
    if not isinstance(value, str) or not value.strip():
        raise QuantityError(f"not a quantity: {value!r}")
    text = value.strip()
    for suffix, mult in _BINARY.items():
        if text.endswith(suffix):
            return _number(text[: -len(suffix)], value) * mult
    suffix = text[-1] if text[-1] in _DECIMAL and not text[-1].isdigit() else ""
    number = text[: -len(suffix)] if suffix else text
    return _number(number, value) * _DECIMAL[suffix]


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _number(text: str, original: object) -> Decimal:
    if not _NUMBER.fullmatch(text):  # Decimal alone would accept "1_000", " 1", "Infinity"
        raise QuantityError(f"not a quantity: {original!r}")
    try:
        result = Decimal(text)
    except InvalidOperation as exc:
        raise QuantityError(f"not a quantity: {original!r}") from exc
    if not result.is_finite():
        raise QuantityError(f"not a quantity: {original!r}")
    return result


def to_units(name: str, value: object) -> int:
    """One resource value in integer units (cpu: millicores), rounded up."""
    amount = parse_quantity(value)
    if name == "cpu":
        amount *= 1000
    return math.ceil(amount)


def parse_resources(raw: Mapping[str, object] | None) -> Resources:
    return {str(k): to_units(str(k), v) for k, v in (raw or {}).items()}


def add(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def sub(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) - v
    return out


def total(items: Iterable[Mapping[str, int]]) -> Resources:
    out: Resources = {}
    for item in items:
        for k, v in item.items():
            out[k] = out.get(k, 0) + v
    return out


def maximum(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    out = dict(a)
    for k, v in b.items():
        out[k] = max(out.get(k, 0), v)
    return out


def fits_in(request: Mapping[str, int], free: Mapping[str, int]) -> bool:
    """True when every requested amount is available (a resource the node lacks counts as 0)."""
    return all(v <= 0 or free.get(k, 0) >= v for k, v in request.items())


def format_resources(res: Mapping[str, int]) -> str:
    parts = []
    for k in sorted(res):
        v = res[k]
        if k == "cpu":
            parts.append(f"cpu={v / 1000:g}")
        elif k == "memory" and v % 2**30 == 0:
            parts.append(f"memory={v // 2**30}Gi")
        elif k == "memory" and v % 2**20 == 0:
            parts.append(f"memory={v // 2**20}Mi")
        else:
            parts.append(f"{k}={v}")
    return ",".join(parts)
