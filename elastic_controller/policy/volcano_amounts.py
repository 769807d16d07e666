"""Volcano's ``Resource`` arithmetic (``resource_info.go``, Volcano v1.15.1) on this project's amount
maps, for the capacity plugin's rules (``capacity.py``). Pure, standard library only.

A Resource always has cpu and memory (0 when not given); other ("scalar") resources are present or
absent, and a few functions tell absent from zero. Here an amount map leaves cpu/memory out when 0
and keeps a scalar key when Volcano's map would have it. The ``pods`` resource is left out (Volcano's
``IsIgnoredScalarResource``); unbounded amounts are ``math.inf`` (Volcano's ``math.MaxFloat64``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

CPU = "cpu"
MEMORY = "memory"
_STANDARD = (CPU, MEMORY)
IGNORED = frozenset({"pods"})  # resource_info.go:232 ignoredScalarResources
INF = math.inf

Amounts = Mapping[str, float]


# -- Volcano's Resource arithmetic (resource_info.go) ---------------------------------------------
# A Resource always has cpu and memory (0 when not given); other ("scalar") resources are present or
# absent, and a few functions tell absent from zero. Here an amount map leaves cpu/memory out when 0
# and keeps a scalar key when Volcano's map would have it.


def _clean(res: Mapping[str, float] | None) -> dict[str, float]:
    """A spec's resources as Volcano's ``NewResource`` reads them (resource_info.go:87), ``pods`` left out."""
    return {k: float(v) for k, v in (res or {}).items() if k not in IGNORED}


def _get(res: Amounts, name: str) -> float:
    """``Resource.Get`` (resource_info.go:216): absent is 0."""
    return res.get(name, 0.0)


def _scalars(res: Amounts) -> Iterable[str]:
    return (k for k in res if k not in _STANDARD)


def is_empty(res: Amounts) -> bool:
    """``Resource.IsEmpty`` (resource_info.go:250): no dimension at or above ``minResource``."""
    return all(v <= 0 for k, v in res.items() if k not in IGNORED)


def names(res: Amounts) -> set[str]:
    """``Resource.ResourceNames`` (resource_info.go:195): the dimensions with a positive amount."""
    return {k for k, v in res.items() if v > 0 and k not in IGNORED}


def add(a: Amounts, b: Amounts) -> dict[str, float]:
    """``Resource.Add`` (resource_info.go:287): scalars of either side are kept."""
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0.0) + v
    return out


def sub(a: Amounts, b: Amounts) -> dict[str, float]:
    """``Resource.sub`` (resource_info.go:318)."""
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0.0) - v
    return out


def exceeded_part(left: Amounts, right: Amounts) -> dict[str, float]:
    """``ExceededPart`` (resource_info.go:1085, through ``Diff`` with ``Zero`` defaults, :889): what
    ``left`` has beyond ``right``; a scalar where ``left`` is not above ``right`` is absent."""
    out: dict[str, float] = {}
    for k in set(left) | set(right) | set(_STANDARD):
        lv, rv = _get(left, k), _get(right, k)
        if lv > rv:
            out[k] = lv - rv  # inf - finite stays inf, as MaxFloat64 - x does
    return out


def min_dimension(res: Amounts, limit: Amounts) -> dict[str, float]:
    """``Resource.MinDimensionResource(limit, Infinity)`` (resource_info.go:949): each dimension of
    ``res`` lowered to ``limit``'s; a scalar ``limit`` does not name does not limit (and a scalar
    ``res`` lacks is not added)."""
    out = dict(res)
    for k in _STANDARD:
        if _get(limit, k) < _get(res, k):
            out[k] = _get(limit, k)
    for k in _scalars(res):
        if k in limit:
            out[k] = min(res[k], limit[k])
    return out


def maximum(a: Amounts, b: Amounts) -> dict[str, float]:
    """``helpers.Max`` (pkg/scheduler/api/helpers/helpers.go:51): per dimension, scalars of either."""
    out = {k: max(_get(a, k), _get(b, k)) for k in _STANDARD}
    for k in {*_scalars(a), *_scalars(b)}:
        vals = [res[k] for res in (a, b) if k in res and res[k] >= 0]
        if vals:
            out[k] = max(vals)
    return out


def less_equal_on(used: Amounts, limit: Amounts, request: Amounts) -> bool:
    """``LessEqualWithDimensionAndResourcesName(limit, request)`` (resource_info.go:479): ``used``
    within ``limit`` on every dimension ``request`` asks for (a limit that does not name a scalar is 0)."""
    return all(_get(used, k) <= _get(limit, k) for k, v in request.items() if v > 0 and k not in IGNORED)


def less_equal_partly_on(used: Amounts, limit: Amounts, request: Amounts) -> bool:
    """``LessEqualPartlyWithDimensionZeroFiltered(limit, request)`` (resource_info.go:681, :636):
    ``used`` within ``limit`` on at least one dimension ``request`` asks for (dimensions where both
    are zero are left out; a limit that does not name one is 0)."""
    for k, v in request.items():
        if v <= 0 or k in IGNORED:
            continue
        u, lim = _get(used, k), _get(limit, k)
        if u <= 0 and lim <= 0:
            continue
        if u <= lim:
            return True
    return False


def relevant_dimensions(deserved: Amounts, request: Amounts) -> list[str]:
    """The dimensions ``GreaterPartlyWithRelevantDimensions`` (resource_info.go:854) compares:
    those ``request`` asks for that ``deserved`` has (cpu and memory: a positive amount; other
    resources: named, even as 0)."""
    out = []
    for k, v in request.items():
        if v <= 0 or k in IGNORED:
            continue
        if (k in _STANDARD and _get(deserved, k) > 0) or (k not in _STANDARD and k in deserved):
            out.append(k)
    return sorted(out)


def greater_partly_relevant(allocated: Amounts, deserved: Amounts, request: Amounts) -> bool:
    """``GreaterPartlyWithRelevantDimensions`` (resource_info.go:854): ``allocated`` above
    ``deserved`` on a relevant dimension of ``request``."""
    return any(_get(allocated, k) > _get(deserved, k) for k in relevant_dimensions(deserved, request))


def guarantee_kept(allocated: Amounts, request: Amounts, guarantee: Amounts) -> bool:
    """``checkGuaranteeConstraint`` (capacity.go:1842): with ``request`` gone, the allocation still
    covers the guarantee on every dimension it names (``guarantee.LessEqual(allocated - request, Zero)``)."""
    after = sub(allocated, request)
    return all(_get(after, k) >= v for k, v in guarantee.items() if k not in IGNORED)


def has_relevant_deserved(request: Amounts, deserved: Amounts) -> bool:
    """``hasRelevantDeserved`` (capacity.go:1866): ``Intersection(request, deserved)`` is not empty."""
    return bool(names(request) & names(deserved))
