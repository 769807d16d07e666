"""The simulated cluster: node pools and Volcano queues, read from a small YAML file.

```yaml
nodes:
  - {name: gpu, count: 64, gpus: 8, cpu: 96, memory: 1Ti, pods: 110}
queues:
  - {name: research, weight: 2}
  - {name: product, weight: 1}
```

Queues may also say what Volcano's ``capacity`` plugin reads: ``deserved``, ``guarantee`` and
``capability`` as resource maps (``{nvidia.com/gpu: 16, cpu: 200}``) and ``parent`` (a queue of the
file, or ``root``). With ``simulate --shares capacity`` (``--hierarchy`` for ``parent``) the simulated
Volcano and the planner judge by them (``quota.py``); under proportion only ``capability`` and
``guarantee`` count (Volcano's proportion plugin reads neither ``deserved`` nor ``parent``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..policy.quantity import QuantityError, Resources, parse_resources, to_units
from .trace import TraceError, checked_item, load_yaml_with_lines

NODE_KEYS = ("name", "count", "gpus", "cpu", "memory", "pods")
QUEUE_KEYS = ("name", "weight", "reclaimable", "deserved", "guarantee", "capability", "parent")
RESOURCE_KEYS = ("deserved", "guarantee", "capability")


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
    deserved: Resources | None = None
    guarantee: Resources | None = None
    capability: Resources | None = None
    parent: str = ""  # "" or "root": a child of root


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
    for raw_pool in nodes:
        item, line = checked_item(raw_pool, path, "a node pool", NODE_KEYS)
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
    for raw_queue in doc.get("queues") or [{"name": "default", "__line__": 0}]:
        item, line = checked_item(raw_queue, path, "a queue", QUEUE_KEYS)
        qname = item.get("name")
        if not isinstance(qname, str) or not qname or qname in qnames:
            raise TraceError(path, line, f"queue 'name' must be a new non-empty string, got {qname!r}")
        qnames.add(qname)
        reclaimable = item.get("reclaimable", True)
        if not isinstance(reclaimable, bool):
            raise TraceError(path, line, f"'reclaimable' must be true or false, got {reclaimable!r}")
        resources: dict[str, Resources | None] = {}
        for key in RESOURCE_KEYS:
            raw = item.get(key)
            if raw is None:
                resources[key] = None
                continue
            if isinstance(raw, dict):
                raw = {k: v for k, v in raw.items() if k != "__line__"}
            if not isinstance(raw, dict) or not raw:
                raise TraceError(path, line, f"{key!r} must be a non-empty map of resource to quantity, got {raw!r}")
            try:
                parsed = parse_resources(raw)
            except QuantityError as exc:
                raise TraceError(path, line, f"{key!r}: {exc}") from None
            if any(v < 0 for v in parsed.values()):
                raise TraceError(path, line, f"{key!r}: quantities must not be negative, got {raw!r}")
            resources[key] = parsed
        parent = item.get("parent", "")
        if not isinstance(parent, str) or parent == qname:
            raise TraceError(path, line, f"'parent' must be another queue's name, got {parent!r}")
        queues.append(QueueSpec(qname, _positive_int(item, "weight", path, line, 1), reclaimable,
                                deserved=resources["deserved"], guarantee=resources["guarantee"],
                                capability=resources["capability"], parent="" if parent == "root" else parent))
    known = {q.name for q in queues}
    for q in queues:
        if q.parent and q.parent not in known:
            raise TraceError(path, 0, f"queue {q.name!r}: parent {q.parent!r} is not a queue of the file (nor root)")
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
        extra = ""
        for key in RESOURCE_KEYS:
            res = getattr(q, key)
            if res is not None:
                extra += f", {key}: {{{', '.join(f'{k}: {_quantity(k, v)}' for k, v in sorted(res.items()))}}}"
        if q.parent:
            extra += f", parent: {q.parent}"
        if not q.reclaimable:
            extra += ", reclaimable: false"
        lines.append(f"  - {{name: {q.name}, weight: {q.weight}{extra}}}")
    return "\n".join(lines) + "\n"


def _quantity(name: str, value: int) -> str:
    return f"{value}m" if name == "cpu" else str(value)
