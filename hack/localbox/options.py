"""The options of a box (what `python -m hack.localbox up` takes): a leaf module, so that the
component modules can name them without importing box.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class BoxOptions:
    name: str = "default"
    profile: str = "full"
    nodes: int = 4
    gpus_per_node: int = 8
    node_cpu: str = "32"
    node_memory: str = "256Gi"
    node_pods: int = 110
    volcano_conf: str = "ours"  # NAME of hack/volcano-scheduler-NAME.conf (ours, native, gang-native, ...) | a file
    real_nodes: int = 0  # real kubelet nodes beside the kwok ones (hack/localbox/realnode.py)
    real_node_gpus: int = 4  # fake nvidia.com/gpu each real node advertises
    real_node_images: list[str] = field(default_factory=list)  # OCI archives imported into every real node
    operator_threads: int = 1  # the training operator's --controller-threads (its QPS and burst scaled with it)
    timeout: float = 90.0  # per component health wait
    keep_on_failure: bool = False
    quiet: bool = False

    def compatible(self, other: dict[str, Any]) -> list[str]:
        diffs = []
        for k in ("profile", "nodes", "gpus_per_node", "node_cpu", "node_memory", "node_pods", "volcano_conf",
                  "real_nodes", "real_node_gpus", "operator_threads"):
            if other.get(k, BoxOptions.__dataclass_fields__[k].default) != getattr(self, k):
                diffs.append(f"{k}={other.get(k)!r} (asked {getattr(self, k)!r})")
        return diffs
