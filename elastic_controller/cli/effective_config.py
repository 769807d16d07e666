"""Which ElasticConfig ``status`` and ``queues`` decide with, and where it came from.

``--config FILE`` wins. Without it they read the configuration the controller runs with: its ConfigMap
(``--config-from NAMESPACE/NAME``, default ``volcano-elastic-system/volcano-elastic-config``, key
``config.yaml``). The Helm chart names that ConfigMap exactly so; ``kubectl apply -k manifests/base``
appends a content hash to the name, so when the plain name is not there the ConfigMap is the one the
controller's Deployment (``volcano-elastic-controller`` in the same namespace) mounts as its ``config``
volume. The viewer Role ``volcano-elastic-viewer`` in that namespace grants ``get`` on exactly these two
objects. A ConfigMap that is absent, not readable or not a valid ElasticConfig is said plainly, and the
built-in defaults are used, with a warning: the decisions shown may then differ from the agent's."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from ..kube.errors import ForbiddenError, KubeError, NotFoundError
from ..kube.resources import CONFIGMAPS, Resource
from ..policy.settings import ElasticConfig
from .common import fail, load_config_or_exit, warn

DEFAULT_CONFIG_FROM = "volcano-elastic-system/volcano-elastic-config"
CONFIG_KEY = "config.yaml"  # the ConfigMap's key both Deployments mount as /etc/volcano-elastic/config.yaml
CONTROLLER_DEPLOYMENT = "volcano-elastic-controller"
CONFIG_VOLUME = "config"
VIEWER_ROLE = "volcano-elastic-viewer"
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
DEFAULTS = "defaults (built in)"


@dataclass(frozen=True, slots=True)
class ConfigChoice:
    """The config a command decides with; ``source`` says where it came from (a table line and the
    JSON field ``configSource``); ``warning``: why it is not the controller's (None when it is)."""

    config: ElasticConfig
    source: str
    warning: str | None = None


def add_config_from_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config-from", default=DEFAULT_CONFIG_FROM, metavar="NAMESPACE/NAME",
                        help="without --config: the controller's ConfigMap to read the configuration from (key "
                             f"{CONFIG_KEY}; default {DEFAULT_CONFIG_FROM}; the Helm release's namespace when "
                             "installed elsewhere; '' for the built-in defaults)")


def from_file(args: argparse.Namespace, command: str) -> ConfigChoice | None:
    """``--config FILE`` when given (exit 2 listing every bad path), else None."""
    if not getattr(args, "config", None):
        return None
    return ConfigChoice(load_config_or_exit(args, command), f"file {args.config} (--config)")


def split_ref(ref: str) -> tuple[str, str]:
    ns, sep, name = ref.partition("/")
    if not sep or not ns or not name or "/" in name:
        raise ValueError(f"--config-from {ref!r} is not NAMESPACE/NAME")
    return ns, name


def _mounted_configmap(deployment: dict[str, Any]) -> str | None:
    """The name of the ConfigMap the Deployment mounts as its ``config`` volume."""
    spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    for volume in spec.get("volumes") or []:
        if isinstance(volume, dict) and volume.get("name") == CONFIG_VOLUME:
            name = (volume.get("configMap") or {}).get("name")
            return name if isinstance(name, str) and name else None
    return None


def _defaults(why: str) -> ConfigChoice:
    return ConfigChoice(ElasticConfig(), DEFAULTS,
                        f"{why}; using the built-in defaults, so the decisions shown may differ from the "
                        "agent's (pass --config FILE, or --config-from NAMESPACE/NAME)")


def _forbidden(ns: str, what: str) -> ConfigChoice:
    return _defaults(f"not allowed to read {what}: the Role {VIEWER_ROLE} in namespace {ns} grants it (kubectl -n "
                     f"{ns} create rolebinding NAME --role={VIEWER_ROLE} --group=GROUP)")


def from_cluster(api: Any, ref: str) -> ConfigChoice:
    """The controller's ElasticConfig from its ConfigMap ``ref`` (``NAMESPACE/NAME``); the defaults with
    a warning saying why when it cannot be had. Never raises for what the cluster answers."""
    if not ref:
        return ConfigChoice(ElasticConfig(), f"{DEFAULTS}: --config-from ''")
    ns, name = split_ref(ref)
    where = f"ConfigMap {ns}/{name}"
    forbidden = False
    try:
        cm = api.get(CONFIGMAPS, name, ns)
    except NotFoundError:
        cm = None
    except ForbiddenError:  # a viewer of a kustomize install may get only the hashed name
        cm, forbidden = None, True
    except KubeError as exc:
        return _defaults(f"cannot read {where}: {exc}")
    if cm is None:  # kustomize's hashed name: the one the controller's Deployment mounts
        deployment = f"Deployment {ns}/{CONTROLLER_DEPLOYMENT}"
        try:
            mounted = _mounted_configmap(api.get(DEPLOYMENTS, CONTROLLER_DEPLOYMENT, ns))
        except NotFoundError:
            if forbidden:  # the Role is bound (it grants the Deployment), the plain name is not ours here
                return _defaults(f"{where} is not readable and there is no {deployment} naming another: is "
                                 f"volcano-elastic installed in namespace {ns}?")
            return _defaults(f"{where} not found, nor a {deployment}: is volcano-elastic installed in namespace {ns}?")
        except ForbiddenError:
            return _forbidden(ns, f"{where} or {deployment}" if forbidden else f"{where} (not found) or {deployment}")
        except KubeError as exc:
            return _defaults(f"cannot read {deployment}: {exc}")
        if mounted is None:
            return _defaults(f"{where} {'not readable' if forbidden else 'not found'}, and {deployment} mounts no "
                             f"ConfigMap as its {CONFIG_VOLUME!r} volume")
        where = f"ConfigMap {ns}/{mounted}"
        try:
            cm = api.get(CONFIGMAPS, mounted, ns)
        except ForbiddenError:
            return _forbidden(ns, where)
        except KubeError as exc:
            return _defaults(f"cannot read {where} (mounted by {deployment}): {exc}")
    from ..config import ConfigError, load_config  # (yaml: not imported for --help)

    text = (cm.get("data") or {}).get(CONFIG_KEY)
    if not isinstance(text, str):
        return _defaults(f"{where} has no key {CONFIG_KEY}")
    try:
        cfg = load_config(text, where)
    except ConfigError as exc:
        return _defaults(f"{where} is not a valid ElasticConfig (the controller refuses it too): "
                         + "; ".join(exc.problems))
    return ConfigChoice(cfg, f"{where} (what the controller runs with)")


def before_connecting(args: argparse.Namespace, command: str) -> ConfigChoice | None:
    """``--config FILE`` (read before connecting, so that a bad file exits 2 first), else None after
    checking that ``--config-from`` is NAMESPACE/NAME."""
    chosen = from_file(args, command)
    ref = getattr(args, "config_from", DEFAULT_CONFIG_FROM)
    if chosen is None and ref:
        try:
            split_ref(ref)
        except ValueError as exc:
            fail(command, str(exc))
    return chosen


def choose_config(args: argparse.Namespace, command: str, api: Any, chosen: ConfigChoice | None) -> ConfigChoice:
    """``chosen`` (``before_connecting``'s), else the controller's ConfigMap read with ``api``: a warning
    on stderr, prefixed like every other, when it cannot be had and the defaults are used."""
    if chosen is None:
        chosen = from_cluster(api, getattr(args, "config_from", DEFAULT_CONFIG_FROM))
    if chosen.warning:
        warn(command, chosen.warning)
    return chosen


def summary(choice: ConfigChoice) -> str:
    """The table's first line: where the configuration came from."""
    return f"CONFIG {choice.source}"
