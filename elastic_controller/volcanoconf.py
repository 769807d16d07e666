"""The Volcano scheduler's configuration, as far as queue shares go: which plugin divides the
cluster between queues, and whether it matches the ``shares`` the agent was configured with.

Volcano reads ``volcano-scheduler.conf`` from a ConfigMap (``volcano-scheduler-configmap`` in
``volcano-system`` for the Helm chart and the installer YAML). ``proportion`` and ``capacity`` are
mutually exclusive there (Volcano's docs/user-guide/how_to_use_capacity_plugin.md); ``capacity``
with ``enableHierarchy: true`` makes queues a tree. The agent decides on one model (config
``shares``): when the scheduler runs the other one, the agent's evictions and gate lifts follow
rules Volcano does not apply, hence the loud warning (``mismatch``).

And which actions evict: the legacy ``preempt`` and ``reclaim``, or (Volcano >= 1.15) the
gang-aware ``gangpreempt`` and ``gangreclaim``. Next to the volcano-elastic agent that makes two
evictors racing for the same GPUs (``two_evictors``, docs/volcano-native.md). Both mark their
victims with the pod condition DisruptionTarget, reason PreemptionByScheduler, and delete them;
the agent counts those as scale events of the victim's job.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import yaml

from .kube.api import KubeAPI, owner_ref
from .kube.errors import ForbiddenError, KubeError, NotFoundError
from .kube.events import EventRecorder
from .kube.resources import CONFIGMAPS
from .policy.settings import SharesConfig

log = logging.getLogger(__name__)

DEFAULT_CONFIGMAP = "volcano-system/volcano-scheduler-configmap"
CONF_KEY = "volcano-scheduler.conf"
MISMATCH_REASON = "SharesPluginMismatch"


@dataclass(frozen=True, slots=True)
class SchedulerShares:
    """What a scheduler configuration enables: ``plugins`` of the two share plugins it lists (in
    order), ``hierarchy`` (capacity's ``enableHierarchy``), ``ancestor_reclaim_level`` (capacity's
    argument, 0 by default)."""

    plugins: tuple[str, ...]
    hierarchy: bool = False
    ancestor_reclaim_level: int = 0


class SchedulerConfError(ValueError):
    """The scheduler configuration is not what Volcano would read."""


def parse_scheduler_conf(text: str) -> SchedulerShares:
    """The share plugins of a ``volcano-scheduler.conf`` document (``tiers[].plugins[]``)."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SchedulerConfError(f"not valid YAML: {exc}".replace("\n", " ")) from exc
    if not isinstance(doc, dict):
        raise SchedulerConfError("not a mapping")
    tiers = doc.get("tiers") or []
    if not isinstance(tiers, list):
        raise SchedulerConfError("tiers: not a list")
    found: list[str] = []
    hierarchy = False
    level = 0
    for tier in tiers:
        plugins = tier.get("plugins") if isinstance(tier, dict) else None
        for plugin in plugins if isinstance(plugins, list) else []:
            if not isinstance(plugin, dict):
                continue
            name = plugin.get("name")
            if name not in ("proportion", "capacity"):
                continue
            found.append(str(name))
            if name == "capacity":
                hierarchy = plugin.get("enableHierarchy") is True
                args: Any = plugin.get("arguments") or {}
                raw = args.get("ancestorReclaimLevel", 0) if isinstance(args, dict) else 0
                level = raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else 0
    return SchedulerShares(tuple(found), hierarchy, level)


def describe(shares: SharesConfig) -> str:
    """The model in use, for logs and ``status``: ``proportion``, ``capacity`` or ``capacity (hierarchical)``."""
    if shares.plugin == "capacity" and shares.hierarchy:
        return "capacity (hierarchical)"
    return shares.plugin


def mismatch(configured: SharesConfig, scheduler: SchedulerShares) -> str | None:
    """Why the agent's ``shares`` do not match what the scheduler runs, or None when they do."""
    want = describe(configured)
    if not scheduler.plugins:
        return (f"the Volcano scheduler enables neither proportion nor capacity, so it divides nothing "
                f"between queues, but volcano-elastic is configured with shares.plugin {configured.plugin}")
    if len(set(scheduler.plugins)) > 1:
        return ("the Volcano scheduler enables both proportion and capacity, which Volcano documents as "
                f"mutually exclusive; volcano-elastic is configured with {want}")
    plugin = scheduler.plugins[0]
    if plugin != configured.plugin:
        hint = "capacity, hierarchy: true" if plugin == "capacity" and scheduler.hierarchy else plugin
        return (f"the Volcano scheduler runs the {plugin} plugin but volcano-elastic is configured with "
                f"shares.plugin {configured.plugin}: its evictions and gate lifts follow rules Volcano does "
                f"not apply; set shares: {{plugin: {hint}}}")
    if plugin == "capacity" and scheduler.hierarchy != configured.hierarchy:
        return (f"the Volcano scheduler runs capacity with enableHierarchy: {str(scheduler.hierarchy).lower()} "
                f"but volcano-elastic is configured with shares.hierarchy: {str(configured.hierarchy).lower()}")
    if plugin == "capacity" and scheduler.hierarchy and scheduler.ancestor_reclaim_level > 0:
        return (f"the Volcano scheduler runs capacity with ancestorReclaimLevel {scheduler.ancestor_reclaim_level}; "
                "volcano-elastic models only the default 0 (leaf queues compared for reclaim)")
    return None


def split_ref(ref: str) -> tuple[str, str]:
    """``NAMESPACE/NAME`` -> (namespace, name); ValueError when it is not that."""
    ns, sep, name = ref.partition("/")
    if not sep or not ns or not name or "/" in name:
        raise ValueError(f"not NAMESPACE/NAME: {ref!r}")
    return ns, name


def configmap_shares(configmap: dict[str, Any]) -> SchedulerShares:
    """The share plugins of the scheduler's ConfigMap object (key ``volcano-scheduler.conf``)."""
    data = configmap.get("data") or {}
    text = data.get(CONF_KEY)
    if not isinstance(text, str):
        raise SchedulerConfError(f"no {CONF_KEY} key")
    return parse_scheduler_conf(text)


def check_scheduler(api: KubeAPI, shares: SharesConfig, ref: str, recorder: EventRecorder | None = None) -> str:
    """Read the scheduler's ConfigMap ``ref`` (``NAMESPACE/NAME``) and compare it with ``shares``:
    a mismatch is logged as a warning and recorded as a Warning Event on the ConfigMap. Never raises:
    a ConfigMap the agent may not read (RBAC) or that is absent only costs the check. Returns a
    one-line verdict for the logs."""
    model = describe(shares)
    if not ref:
        return f"{model} (scheduler configuration not checked)"
    try:
        namespace, name = split_ref(ref)
        cm = api.get(CONFIGMAPS, name, namespace)
        found = configmap_shares(cm)
    except ForbiddenError:
        log.info("cannot read the Volcano scheduler configuration (no RBAC get on it); shares not checked",
                 extra={"configmap": ref, "shares": model})
        return f"{model} (not checked: no access to {ref})"
    except NotFoundError:
        log.warning("the Volcano scheduler configuration was not found; shares not checked",
                    extra={"configmap": ref, "shares": model})
        return f"{model} (not checked: {ref} not found)"
    except (KubeError, ValueError) as exc:
        log.warning("the Volcano scheduler configuration could not be checked",
                    extra={"configmap": ref, "shares": model, "error": str(exc)})
        return f"{model} (not checked: {exc})"
    problem = mismatch(shares, found)
    if problem is None:
        log.info("queue shares match the Volcano scheduler", extra={"configmap": ref, "shares": model})
        return f"{model} (matches {ref})"
    log.warning("QUEUE SHARES DO NOT MATCH THE VOLCANO SCHEDULER: %s", problem,
                extra={"configmap": ref, "shares": model, "scheduler_plugins": list(found.plugins)})
    if recorder is not None:
        ref_obj = owner_ref({**cm, "apiVersion": "v1", "kind": "ConfigMap"})
        recorder.emit(ref_obj, "Warning", MISMATCH_REASON, f"volcano-elastic: {problem}")
    return f"{model} (MISMATCH: {problem})"


EVICTING_ACTIONS = ("preempt", "reclaim", "gangpreempt", "gangreclaim")
# Plugins that only matter when an evicting action runs (cdp: cooldown before a pod may be evicted).
EVICTION_PLUGINS = ("cdp",)


@dataclass(frozen=True, slots=True)
class SchedulerActions:
    """The actions (lowercased, in order) and every plugin name of a scheduler configuration."""

    actions: tuple[str, ...]
    plugins: tuple[str, ...]

    @property
    def evicting(self) -> tuple[str, ...]:
        return tuple(a for a in self.actions if a in EVICTING_ACTIONS)


def parse_scheduler_actions(text: str) -> SchedulerActions:
    """The ``actions`` and plugin names of a ``volcano-scheduler.conf`` document."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SchedulerConfError(f"not valid YAML: {exc}".replace("\n", " ")) from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("actions"), str):
        raise SchedulerConfError("no actions string")
    actions = tuple(a.strip().lower() for a in doc["actions"].split(",") if a.strip())
    plugins: list[str] = []
    tiers = doc.get("tiers")
    for tier in tiers if isinstance(tiers, list) else []:
        entries = tier.get("plugins") if isinstance(tier, dict) else None
        for p in entries if isinstance(entries, list) else []:
            if isinstance(p, dict) and isinstance(p.get("name"), str):
                plugins.append(p["name"])
    return SchedulerActions(actions, tuple(plugins))


def two_evictors_warning(conf: SchedulerActions, source: str) -> str | None:
    """The warning ``status`` prints when Volcano evicts next to our agent, else None."""
    if not conf.evicting:
        return None
    extra = [p for p in conf.plugins if p in EVICTION_PLUGINS]
    with_plugins = f" (with plugin {', '.join(extra)})" if extra else ""
    return (f"WARNING: two evictors are running: the Volcano scheduler ({source}) runs "
            f"{', '.join(conf.evicting)}{with_plugins} next to the volcano-elastic agent. Volcano deletes "
            f"pods without the Eviction API (no PDBs, no fulfillment or cooldown), and the two race for "
            f"the same GPUs; the agent counts Volcano's evictions as scale events. Recommended: actions "
            f"\"enqueue, allocate, backfill\" (see docs/volcano-native.md).")


def two_evictors(api: KubeAPI, ref: str) -> str | None:
    """The two-evictors warning when the scheduler's ConfigMap ``ref`` (``NAMESPACE/NAME``) can be
    read and its actions evict; None (say nothing) when it cannot be read (forbidden, absent,
    not a scheduler configuration) or ``ref`` is empty. Never raises."""
    if not ref:
        return None
    try:
        namespace, name = split_ref(ref)
        cm = api.get(CONFIGMAPS, name, namespace)
        text = (cm.get("data") or {}).get(CONF_KEY)
        if not isinstance(text, str):
            return None
        conf = parse_scheduler_actions(text)
    except (KubeError, ValueError):
        return None
    return two_evictors_warning(conf, f"ConfigMap {ref}")
