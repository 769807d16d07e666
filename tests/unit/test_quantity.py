"""Kubernetes quantities as integer units (cpu in millicores, the rest in base units, rounded up)."""

from __future__ import annotations

import pytest

from elastic_controller.policy.quantity import (
    QuantityError,
    add,
    fits_in,
    format_resources,
    maximum,
    parse_resources,
    sub,
    to_units,
    total,
)

GI = 2**30


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        pytest.param("cpu", "1", 1000, id="cpu-whole"),
        pytest.param("cpu", "500m", 500, id="cpu-milli"),
        pytest.param("cpu", "0.5", 500, id="cpu-fraction"),
        pytest.param("cpu", "1.5", 1500, id="cpu-decimal"),
        pytest.param("cpu", "100u", 1, id="cpu-micro-rounds-up"),
        pytest.param("cpu", "1n", 1, id="cpu-nano-rounds-up"),
        pytest.param("cpu", 2, 2000, id="cpu-json-int"),
        pytest.param("cpu", 0.25, 250, id="cpu-json-float"),
        pytest.param("cpu", "1e3", 1_000_000, id="cpu-exponent"),
        pytest.param("memory", "16Gi", 16 * GI, id="mem-Gi"),
        pytest.param("memory", "512Mi", 512 * 2**20, id="mem-Mi"),
        pytest.param("memory", "1Ki", 1024, id="mem-Ki"),
        pytest.param("memory", "1Ti", 2**40, id="mem-Ti"),
        pytest.param("memory", "1Pi", 2**50, id="mem-Pi"),
        pytest.param("memory", "1Ei", 2**60, id="mem-Ei"),
        pytest.param("memory", "1.5Gi", 3 * 2**29, id="mem-fractional-Gi"),
        pytest.param("memory", "1k", 1000, id="mem-k"),
        pytest.param("memory", "1M", 10**6, id="mem-M"),
        pytest.param("memory", "1G", 10**9, id="mem-G"),
        pytest.param("memory", "1T", 10**12, id="mem-T"),
        pytest.param("memory", "1P", 10**15, id="mem-P"),
        pytest.param("memory", "2E", 2 * 10**18, id="mem-E-exa-suffix"),
        pytest.param("memory", "1E", 10**18, id="mem-1E-exa-suffix"),
        pytest.param("memory", "129e6", 129 * 10**6, id="mem-exponent"),
        pytest.param("memory", "1.5", 2, id="mem-fraction-rounds-up"),
        pytest.param("memory", "100m", 1, id="mem-milli-rounds-up"),
        pytest.param("nvidia.com/gpu", "8", 8, id="gpu"),
        pytest.param("nvidia.com/gpu", "0", 0, id="gpu-zero"),
        pytest.param("pods", "110", 110, id="pods"),
        pytest.param("cpu", " 2 ", 2000, id="surrounding-space"),
        pytest.param("cpu", "+1", 1000, id="explicit-plus"),
        pytest.param("cpu", ".5", 500, id="leading-dot"),
        pytest.param("memory", "1e+3", 1000, id="signed-exponent"),
        pytest.param("memory", 1e20, 10**20, id="json-float-exponent"),
    ],
)
def test_to_units(name: str, value: object, expected: int) -> None:
    assert to_units(name, value) == expected


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("", id="empty"),
        pytest.param("   ", id="blank"),
        pytest.param("abc", id="word"),
        pytest.param("Gi", id="suffix-only"),
        pytest.param("1Xi", id="unknown-binary-suffix"),
        pytest.param("1.2.3", id="two-dots"),
        pytest.param("NaN", id="nan"),
        pytest.param("Infinity", id="infinity"),
        pytest.param("1e", id="dangling-exponent"),
        pytest.param("1_000", id="underscore"),
        pytest.param("0x10", id="hex"),
        pytest.param("1 Gi", id="inner-space"),
        pytest.param(float("nan"), id="json-nan"),
        pytest.param(float("inf"), id="json-inf"),
        pytest.param(True, id="bool"),
        pytest.param(None, id="none"),
        pytest.param([1], id="list"),
        pytest.param({"a": 1}, id="dict"),
    ],
)
def test_bad_quantities_raise(value: object) -> None:
    with pytest.raises(QuantityError):
        to_units("memory", value)


def test_quantity_error_is_value_error() -> None:
    assert issubclass(QuantityError, ValueError)


def test_parse_resources() -> None:
    assert parse_resources({"cpu": "250m", "memory": "1Gi", "nvidia.com/gpu": 2}) == {
        "cpu": 250, "memory": GI, "nvidia.com/gpu": 2}
    assert parse_resources(None) == {}
    assert parse_resources({}) == {}


@pytest.mark.parametrize(
    ("fn", "a", "b", "expected"),
    [
        pytest.param(add, {"cpu": 1}, {"cpu": 2, "gpu": 1}, {"cpu": 3, "gpu": 1}, id="add"),
        pytest.param(sub, {"cpu": 3}, {"cpu": 1, "gpu": 1}, {"cpu": 2, "gpu": -1}, id="sub"),
        pytest.param(maximum, {"cpu": 3, "m": 1}, {"cpu": 1, "m": 5}, {"cpu": 3, "m": 5}, id="maximum"),
    ],
)
def test_arithmetic(fn, a, b, expected) -> None:  # type: ignore[no-untyped-def]
    before = dict(a)
    assert fn(a, b) == expected
    assert a == before, "inputs are not mutated"


def test_total() -> None:
    assert total([{"cpu": 1}, {"cpu": 2, "memory": 3}, {}]) == {"cpu": 3, "memory": 3}
    assert total([]) == {}


@pytest.mark.parametrize(
    ("request_", "free", "expected"),
    [
        pytest.param({"cpu": 1}, {"cpu": 1}, True, id="exact"),
        pytest.param({"cpu": 2}, {"cpu": 1}, False, id="short"),
        pytest.param({"nvidia.com/gpu": 1}, {"cpu": 8}, False, id="missing-resource-is-zero"),
        pytest.param({"nvidia.com/gpu": 0}, {"cpu": 8}, True, id="zero-request-always-fits"),
        pytest.param({}, {}, True, id="nothing"),
    ],
)
def test_fits_in(request_: dict[str, int], free: dict[str, int], expected: bool) -> None:
    assert fits_in(request_, free) is expected


def test_format_resources() -> None:
    assert format_resources({"cpu": 1500, "memory": 16 * GI, "nvidia.com/gpu": 2}) == (
        "cpu=1.5,memory=16Gi,nvidia.com/gpu=2")
    assert format_resources({"memory": 3 * 2**20}) == "memory=3Mi"
    assert format_resources({"memory": 1000}) == "memory=1000"
