"""What the Volcano scheduler's configuration says about evictions (read by ``status``).

Volcano evicts on its own when its scheduler runs an evicting action: the legacy ``preempt`` and
``reclaim``, or (Volcano >= 1.15) the gang-aware ``gangpreempt`` and ``gangreclaim``. Next to the
volcano-elastic agent that makes two evictors racing for the same GPUs (docs/volcano-native.md).
Both mark their victims with the pod condition DisruptionTarget, reason PreemptionByScheduler,
and delete them; the agent counts those as scale events of the victim's job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

EVICTING_ACTIONS = ("preempt", "reclaim", "gangpreempt", "gangreclaim")
# Plugins that only matter when an evicting action runs (cdp: cooldown before a pod may be evicted).
EVICTION_PLUGINS = ("cdp",)
DEFAULT_CONFIGMAP = "volcano-system/volcano-scheduler-configmap"


@dataclass(frozen=True, slots=True)
class SchedulerConf:
    actions: tuple[str, ...]
    plugins: tuple[str, ...]

    @property
    def evicting_actions(self) -> tuple[str, ...]:
        return tuple(a for a in self.actions if a in EVICTING_ACTIONS)


def parse_scheduler_conf(text: str) -> SchedulerConf | None:
    """The actions (lowercased, in order) and plugin names of a volcano-scheduler.conf; None
    when the text is not such a configuration."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("actions"), str):
        return None
    actions = tuple(a.strip().lower() for a in doc["actions"].split(",") if a.strip())
    plugins: list[str] = []
    tiers = doc.get("tiers")
    for tier in tiers if isinstance(tiers, list) else []:
        entries = tier.get("plugins") if isinstance(tier, dict) else None
        for p in entries if isinstance(entries, list) else []:
            if isinstance(p, dict) and isinstance(p.get("name"), str):
                plugins.append(p["name"])
    return SchedulerConf(actions, tuple(plugins))


def conf_from_configmap(cm: dict[str, Any]) -> SchedulerConf | None:
    """The scheduler configuration in a ConfigMap: its ``volcano-scheduler.conf`` key, else the
    first key ending in ``.conf`` that parses."""
    data = cm.get("data") or {}
    keys = ["volcano-scheduler.conf", *sorted(k for k in data if k.endswith(".conf"))]
    for key in keys:
        if isinstance(data.get(key), str):
            conf = parse_scheduler_conf(data[key])
            if conf is not None:
                return conf
    return None


def two_evictors_warning(conf: SchedulerConf, source: str) -> str | None:
    """The warning ``status`` prints when Volcano evicts next to our agent, else None."""
    evicting = conf.evicting_actions
    if not evicting:
        return None
    extra = [p for p in conf.plugins if p in EVICTION_PLUGINS]
    with_plugins = f" (with plugin {', '.join(extra)})" if extra else ""
    return (f"WARNING: two evictors are running: the Volcano scheduler ({source}) runs "
            f"{', '.join(evicting)}{with_plugins} next to the volcano-elastic agent. Volcano deletes "
            f"pods without the Eviction API (no PDBs, no fulfillment or cooldown), and the two race for "
            f"the same GPUs; the agent counts Volcano's evictions as scale events. Recommended: actions "
            f"\"enqueue, allocate, backfill\" (see docs/volcano-native.md).")


def parse_configmap_ref(ref: str) -> tuple[str, str]:
    """``NAMESPACE/NAME`` -> (namespace, name); ValueError with the reason otherwise."""
    ns, sep, name = ref.partition("/")
    if not sep or not ns or not name or "/" in name:
        raise ValueError(f"{ref!r} is not NAMESPACE/NAME")
    return ns, name
