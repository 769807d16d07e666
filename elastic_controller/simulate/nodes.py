"""Free capacity of the simulated nodes, indexed for best-fit placement by free GPUs.

Volcano's binpack scoring puts a pod on the node it fills best; here that is the node with the
fewest free GPUs that still fits the pod (cpu, memory and the pod count checked too), ties broken
by node order so that runs are deterministic.
"""

from __future__ import annotations

from bisect import bisect_left, insort

from .cluster import ClusterSpec


class NodeTable:
    def __init__(self, cluster: ClusterSpec) -> None:
        self.names: list[str] = []
        self.gpus: list[int] = []
        self.cpu: list[int] = []
        self.memory: list[int] = []
        self.pods: list[int] = []
        for pool in cluster.pools:
            width = max(2, len(str(pool.count - 1)))
            for i in range(pool.count):
                self.names.append(f"{pool.name}-{i:0{width}d}")
                self.gpus.append(pool.gpus)
                self.cpu.append(pool.cpu)
                self.memory.append(pool.memory)
                self.pods.append(pool.pods)
        self.capacity_gpus = list(self.gpus)
        self.max_gpus = max(self.gpus)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.by_free: list[list[int]] = [[] for _ in range(self.max_gpus + 1)]
        for i, g in enumerate(self.gpus):
            self.by_free[g].append(i)
        self.free_gpus = sum(self.gpus)

    def __len__(self) -> int:
        return len(self.names)

    def fits(self, node: int, gpus: int, cpu: int, memory: int) -> bool:
        return (self.gpus[node] >= gpus and self.cpu[node] >= cpu and self.memory[node] >= memory
                and self.pods[node] >= 1)

    def best_fit(self, gpus: int, cpu: int, memory: int) -> int:
        """The node to place a pod on, or -1 when none fits."""
        if gpus > self.max_gpus:
            return -1
        cpu_free, mem_free, pods_free = self.cpu, self.memory, self.pods
        for free in range(gpus, self.max_gpus + 1):
            for node in self.by_free[free]:
                if cpu_free[node] >= cpu and mem_free[node] >= memory and pods_free[node] >= 1:
                    return node
        return -1

    def slots(self, gpus: int) -> int:
        """How many pods of ``gpus`` GPUs the free GPUs could hold (other resources ignored)."""
        by_free = self.by_free
        return sum(len(by_free[f]) * (f // gpus) for f in range(gpus, self.max_gpus + 1))

    def largest_free(self) -> int:
        for free in range(self.max_gpus, -1, -1):
            if self.by_free[free]:
                return free
        return 0

    def take(self, node: int, gpus: int, cpu: int, memory: int) -> None:
        self._move(node, -gpus)
        self.cpu[node] -= cpu
        self.memory[node] -= memory
        self.pods[node] -= 1

    def give(self, node: int, gpus: int, cpu: int, memory: int) -> None:
        self._move(node, gpus)
        self.cpu[node] += cpu
        self.memory[node] += memory
        self.pods[node] += 1

    def _move(self, node: int, delta: int) -> None:
        if not delta:
            return
        old = self.gpus[node]
        bucket = self.by_free[old]
        del bucket[bisect_left(bucket, node)]
        self.gpus[node] = old + delta
        insort(self.by_free[old + delta], node)
        self.free_gpus += delta
