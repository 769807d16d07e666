"""The simulated cluster: node pools and Volcano queues, read from a small YAML file.

```yaml
nodes:
  - {name: gpu, count: 64, gpus: 8, cpu: 96, memory: 1Ti, pods: 110}
queues:
  - {name: research, weight: 2}
  - {name: product, weight: 1}
```
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..policy.quantity import QuantityError, to_units
from .trace import TraceError, load_yaml_with_lines

NODE_KEYS = ("name", "count", "gpus", "cpu", "memory", "pods")
QUEUE_KEYS = ("name", "weight", "reclaimable")


@dataclass(frozen=True, slots=True)
class NodePool:
    name: str
    count: int
    gpus: int
    cpu: int  # millicores
    memory: int  # bytes
    pods: int = 110


@dataclass(frozen=True, slots=True)
class QueueSpec:
    name: str
    weight: int = 1
    reclaimable: bool = True


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    pools: tuple[NodePool, ...]
    queues: tuple[QueueSpec, ...] = (QueueSpec("default"),)

    @property
    def total_gpus(self) -> int:
        return sum(p.count * p.gpus for p in self.pools)

    @property
    def node_count(self) -> int:
        return sum(p.count for p in self.pools)


def _positive_int(item: dict[str, Any], key: str, path: str, line: int, default: int | None = None) -> int:
    value = item.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < (0 if key == "gpus" else 1):
        raise TraceError(path, line, f"{key!r} must be a positive integer, got {value!r}")
    return value


def parse_cluster(text: str, path: str) -> ClusterSpec:
    doc = load_yaml_with_lines(text, path)
    if not isinstance(doc, dict):
        raise TraceError(path, 1, "expected a mapping with 'nodes' (and optionally 'queues')")
    extra = [k for k in doc if k not in ("nodes", "queues", "__line__", "apiVersion", "kind")]
    if extra:
        raise TraceError(path, int(doc["__line__"]), f"unknown key(s): {', '.join(map(str, extra))}")
    nodes = doc.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        raise TraceError(path, int(doc["__line__"]), "'nodes' must be a non-empty list of node pools")
    pools: list[NodePool] = []
    names: set[str] = set()
    for item in nodes:
        if not isinstance(item, dict):
            raise TraceError(path, 0, f"a node pool must be a mapping, got {item!r}")
        line = int(item.pop("__line__"))
        unknown = [k for k in item if k not in NODE_KEYS]
        if unknown:
            raise TraceError(path, line, f"unknown key(s): {', '.join(map(str, unknown))}")
        name = str(item.get("name") or f"pool{len(pools)}")
        if name in names:
            raise TraceError(path, line, f"node pool {name!r} defined twice")
        names.add(name)
        try:
            cpu = to_units("cpu", item.get("cpu", 96))
            memory = to_units("memory", item.get("memory", "1Ti"))
        except QuantityError as exc:
            raise TraceError(path, line, str(exc)) from None
        pools.append(NodePool(
            name=name, count=_positive_int(item, "count", path, line, 1),
            gpus=_positive_int(item, "gpus", path, line), cpu=cpu, memory=memory,
            pods=_positive_int(item, "pods", path, line, 110),
        ))
    queues: list[QueueSpec] = []
    qnames: set[str] = set()
    for item in doc.get("queues") or [{"name": "default", "__line__": 0}]:
        if not isinstance(item, dict):
            raise TraceError(path, 0, f"a queue must be a mapping, got {item!r}")
        line = int(item.pop("__line__"))
        unknown = [k for k in item if k not in QUEUE_KEYS]
        if unknown:
            raise TraceError(path, line, f"unknown key(s): {', '.join(map(str, unknown))}")
        qname = item.get("name")
        if not isinstance(qname, str) or not qname or qname in qnames:
            raise TraceError(path, line, f"queue 'name' must be a new non-empty string, got {qname!r}")
        qnames.add(qname)
        reclaimable = item.get("reclaimable", True)
        if not isinstance(reclaimable, bool):
            raise TraceError(path, line, f"'reclaimable' must be true or false, got {reclaimable!r}")
        queues.append(QueueSpec(qname, _positive_int(item, "weight", path, line, 1), reclaimable))
    return ClusterSpec(tuple(pools), tuple(queues))


def load_cluster(path: str | Path) -> ClusterSpec:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(str(path), 0, f"cannot read: {exc}") from exc
    return parse_cluster(text, str(path))


def dump_cluster(spec: ClusterSpec) -> str:
    lines = ["nodes:"]
    for p in spec.pools:
        lines.append(f"  - {{name: {p.name}, count: {p.count}, gpus: {p.gpus}, cpu: {p.cpu // 1000}, "
                     f"memory: {p.memory // 2**30}Gi, pods: {p.pods}}}")
    lines.append("queues:")
    for q in spec.queues:
        lines.append(f"  - {{name: {q.name}, weight: {q.weight}}}")
    return "\n".join(lines) + "\n"
