"""Control plane in a box for volcano-elastic tests and demos (see hack/local-up.sh)."""

from .box import PROFILES, Box, BoxError, BoxOptions, list_boxes
from .paths import describe_missing, missing_binaries

__all__ = ["PROFILES", "Box", "BoxError", "BoxOptions", "describe_missing", "list_boxes", "missing_binaries"]
