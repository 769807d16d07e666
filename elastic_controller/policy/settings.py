"""Typed settings the policy core is given (loaded and validated by ``elastic_controller.config``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .keys import DEFAULT_GATE


@dataclass(frozen=True, slots=True)
class QueuePolicy:
    cooldownSeconds: int = 300
    minRuntimeSeconds: int = 120
    starvationSeconds: int = 30
    maxEvictionsPerCycle: int = 16
    maxScaleUpPerCycle: int = 4
    preemptDuringCooldown: bool = False
    # Seconds between marking a victim (volcano-elastic.io/evict-after) and evicting it, so that its
    # job can checkpoint; 0 evicts at once.
    noticeSeconds: int = 0


@dataclass(frozen=True, slots=True)
class GatingConfig:
    enabled: bool = True
    gateName: str = DEFAULT_GATE


@dataclass(frozen=True, slots=True)
class PrioritiesConfig:
    master: int = 1000
    core: int = 500
    elastic: int = 100


@dataclass(frozen=True, slots=True)
class AgentConfig:
    intervalSeconds: float = 5.0
    dryRun: bool = False


SHARE_PLUGINS = ("proportion", "capacity")


@dataclass(frozen=True, slots=True)
class SharesConfig:
    """Which Volcano plugin divides the cluster between queues (the agent must judge as it does):
    ``proportion`` (weights, Volcano's Helm default; flat) or ``capacity`` (per-queue deserved,
    guarantee and capability; hierarchical queues with ``hierarchy``, its ``enableHierarchy``)."""

    plugin: str = "proportion"
    hierarchy: bool = False


@dataclass(frozen=True, slots=True)
class ElasticConfig:
    schedulerName: str = "volcano"
    defaultQueue: str = "default"
    namespaceQueues: dict[str, str] = field(default_factory=dict)
    gating: GatingConfig = field(default_factory=GatingConfig)
    priorities: PrioritiesConfig = field(default_factory=PrioritiesConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    defaults: QueuePolicy = field(default_factory=QueuePolicy)
    queues: dict[str, QueuePolicy] = field(default_factory=dict)
    shares: SharesConfig = field(default_factory=SharesConfig)

    def queue_policy(self, queue: str) -> QueuePolicy:
        return self.queues.get(queue, self.defaults)
