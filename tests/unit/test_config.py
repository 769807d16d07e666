"""The ElasticConfig document: defaults, strictness, every problem listed by path, queue overlays."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.config import ConfigError, load_config, load_config_file, parse_config
from elastic_controller.policy.settings import ElasticConfig, QueuePolicy

FULL = textwrap.dedent("""\
    apiVersion: volcano-elastic.io/v1alpha1
    kind: ElasticConfig
    schedulerName: volcano
    defaultQueue: default
    namespaceQueues: {team-vision: vision}
    gating: {enabled: true, gateName: volcano-elastic.io/scale-up}
    priorities: {master: 1000, core: 500, elastic: 100}
    agent: {intervalSeconds: 5, dryRun: false}
    defaults:
      cooldownSeconds: 300
      minRuntimeSeconds: 120
      starvationSeconds: 30
      maxEvictionsPerCycle: 16
      maxScaleUpPerCycle: 4
      preemptDuringCooldown: false
    queues:
      vision: {cooldownSeconds: 600}
    """)


def test_design_example_loads() -> None:
    cfg = load_config(FULL)
    assert cfg.namespaceQueues == {"team-vision": "vision"}
    assert cfg.queue_policy("vision").cooldownSeconds == 600
    assert cfg.queue_policy("vision").minRuntimeSeconds == 120
    assert cfg.queue_policy("other") == QueuePolicy()


@pytest.mark.parametrize("text", [pytest.param(None, id="no-file"), pytest.param("", id="empty"),
                                  pytest.param("# only a comment\n", id="comment"),
                                  pytest.param("{}", id="empty-mapping")])
def test_defaults(text: str | None) -> None:
    assert load_config(text) == ElasticConfig()


def test_defaults_match_design() -> None:
    cfg = ElasticConfig()
    assert (cfg.schedulerName, cfg.defaultQueue, cfg.gating.enabled, cfg.gating.gateName) == (
        "volcano", "default", True, "volcano-elastic.io/scale-up")
    assert (cfg.priorities.master, cfg.priorities.core, cfg.priorities.elastic) == (1000, 500, 100)
    assert (cfg.agent.intervalSeconds, cfg.agent.dryRun) == (5, False)
    d = cfg.defaults
    assert (d.cooldownSeconds, d.minRuntimeSeconds, d.starvationSeconds, d.maxEvictionsPerCycle,
            d.maxScaleUpPerCycle, d.preemptDuringCooldown) == (300, 120, 30, 16, 4, False)


def test_load_config_file_none_is_defaults() -> None:
    assert load_config_file(None) == ElasticConfig()


def test_load_config_file(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("defaults: {cooldownSeconds: 7}\n")
    assert load_config_file(f).defaults.cooldownSeconds == 7


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config_file(tmp_path / "missing.yaml")
    assert err.value.problems[0].startswith("(file): cannot read")


def test_apiversion_kind_optional_but_checked() -> None:
    assert load_config("defaults: {}") == ElasticConfig()
    with pytest.raises(ConfigError) as err:
        load_config("apiVersion: v1\nkind: Config\n")
    assert sorted(p.split(":")[0] for p in err.value.problems) == ["apiVersion", "kind"]


def _problems(doc: Any) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_config(doc)
    return err.value.problems


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        pytest.param({"bogus": 1}, "bogus", id="unknown-top-key"),
        pytest.param({"defaults": {"cooldown": 1}}, "defaults.cooldown", id="unknown-defaults-key"),
        pytest.param({"queues": {"q": {"bogus": 1}}}, "queues.q.bogus", id="unknown-queue-key"),
        pytest.param({"gating": {"gate": "x/y"}}, "gating.gate", id="unknown-gating-key"),
        pytest.param({"agent": {"port": 1}}, "agent.port", id="unknown-agent-key"),
        pytest.param({"priorities": {"worker": 1}}, "priorities.worker", id="unknown-priorities-key"),
        pytest.param({"defaults": {"cooldownSeconds": -1}}, "defaults.cooldownSeconds", id="negative"),
        pytest.param({"defaults": {"cooldownSeconds": "300"}}, "defaults.cooldownSeconds", id="string-int"),
        pytest.param({"defaults": {"cooldownSeconds": 1.5}}, "defaults.cooldownSeconds", id="float-int"),
        pytest.param({"defaults": {"cooldownSeconds": True}}, "defaults.cooldownSeconds", id="bool-int"),
        pytest.param({"defaults": {"preemptDuringCooldown": "yes"}}, "defaults.preemptDuringCooldown",
                     id="string-bool"),
        pytest.param({"defaults": {"preemptDuringCooldown": 1}}, "defaults.preemptDuringCooldown", id="int-bool"),
        pytest.param({"defaults": []}, "defaults", id="defaults-not-mapping"),
        pytest.param({"queues": []}, "queues", id="queues-not-mapping"),
        pytest.param({"queues": {"q": 5}}, "queues.q", id="queue-entry-not-mapping"),
        pytest.param({"queues": {"q": {"maxEvictionsPerCycle": -2}}}, "queues.q.maxEvictionsPerCycle",
                     id="queue-negative"),
        pytest.param({"namespaceQueues": ["a"]}, "namespaceQueues", id="ns-queues-not-mapping"),
        pytest.param({"namespaceQueues": {"ns": ""}}, "namespaceQueues.ns", id="ns-queue-empty"),
        pytest.param({"namespaceQueues": {"ns": 3}}, "namespaceQueues.ns", id="ns-queue-int"),
        pytest.param({"schedulerName": ""}, "schedulerName", id="empty-scheduler"),
        pytest.param({"defaultQueue": 5}, "defaultQueue", id="int-default-queue"),
        pytest.param({"gating": {"enabled": "no"}}, "gating.enabled", id="gating-enabled-string"),
        pytest.param({"gating": {"gateName": "nogroup"}}, "gating.gateName", id="gate-unqualified"),
        pytest.param({"priorities": {"master": 0}}, "priorities.master", id="priority-zero"),
        pytest.param({"agent": {"intervalSeconds": 0}}, "agent.intervalSeconds", id="interval-zero"),
        pytest.param({"agent": {"intervalSeconds": -1.5}}, "agent.intervalSeconds", id="interval-negative"),
        pytest.param({"agent": {"dryRun": "false"}}, "agent.dryRun", id="dryrun-string"),
        pytest.param({"gating": "on"}, "gating", id="gating-not-mapping"),
        pytest.param({"priorities": {"master": 100, "core": 500, "elastic": 100}}, "priorities",
                     id="master-not-above-core"),
        pytest.param({"priorities": {"elastic": 600}}, "priorities", id="elastic-above-default-core"),
        pytest.param({"shares": {"plugin": "drf"}}, "shares.plugin", id="shares-unknown-plugin"),
        pytest.param({"shares": {"plugin": ""}}, "shares.plugin", id="shares-empty-plugin"),
        pytest.param({"shares": {"hierarchy": "yes"}}, "shares.hierarchy", id="shares-hierarchy-string"),
        pytest.param({"shares": {"hierarchy": True}}, "shares.hierarchy", id="shares-hierarchy-needs-capacity"),
        pytest.param({"shares": {"enableHierarchy": True}}, "shares.enableHierarchy", id="shares-unknown-key"),
        pytest.param({"shares": "capacity"}, "shares", id="shares-not-mapping"),
        pytest.param({"defaults": {"noticeSeconds": -1}}, "defaults.noticeSeconds", id="notice-negative"),
        pytest.param({"defaults": {"noticeSeconds": 1.5}}, "defaults.noticeSeconds", id="notice-float"),
        pytest.param({"defaults": {"noticeSeconds": "60"}}, "defaults.noticeSeconds", id="notice-string"),
        pytest.param({"queues": {"q": {"noticeSeconds": 86_401}}}, "queues.q.noticeSeconds", id="notice-too-long"),
        pytest.param({"queues": {"q": {"notice": 60}}}, "queues.q.notice", id="notice-misspelt"),
    ],
)
def test_each_problem_names_its_path(doc: dict[str, Any], path: str) -> None:
    problems = _problems(doc)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{path}:") or problems[0].startswith(f"{path}."), problems


def test_every_problem_listed_at_once() -> None:
    doc = {
        "apiVersion": "x", "bogus": 1,
        "defaults": {"cooldownSeconds": -1, "starvationSeconds": "x"},
        "queues": {"a": {"nope": 1}, "b": {"maxScaleUpPerCycle": 1.5}},
        "namespaceQueues": {"ns": ""},
        "agent": {"intervalSeconds": 0},
    }
    problems = _problems(doc)
    paths = sorted(p.split(":")[0] for p in problems)
    assert paths == sorted(["apiVersion", "bogus", "defaults.cooldownSeconds", "defaults.starvationSeconds",
                            "queues.a.nope", "queues.b.maxScaleUpPerCycle", "namespaceQueues.ns",
                            "agent.intervalSeconds"])
    text = str(ConfigError(problems, "f.yaml"))
    assert text.startswith(f"f.yaml: {len(problems)} problem(s)")
    assert all(p in text for p in problems)


def test_unknown_key_lists_known_keys() -> None:
    (problem,) = _problems({"defaults": {"coolDownSeconds": 1}})
    assert "cooldownSeconds" in problem


@pytest.mark.parametrize("text", [pytest.param("a: [", id="bad-yaml"), pytest.param("- 1\n- 2", id="list-root"),
                                  pytest.param("5", id="scalar-root")])
def test_bad_documents(text: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(text)
    assert len(err.value.problems) == 1 and err.value.problems[0].startswith("(root):")
    assert "\n" not in err.value.problems[0]


def test_queue_overlay_of_defaults() -> None:
    cfg = load_config(textwrap.dedent("""\
        defaults: {cooldownSeconds: 100, minRuntimeSeconds: 50, preemptDuringCooldown: true}
        queues:
          a: {cooldownSeconds: 600}
          b: {}
          c:
        """))
    a, b, c = (cfg.queue_policy(q) for q in "abc")
    assert (a.cooldownSeconds, a.minRuntimeSeconds, a.preemptDuringCooldown) == (600, 50, True)
    assert b == cfg.defaults and c == cfg.defaults
    assert cfg.queue_policy("unlisted") == cfg.defaults
    assert cfg.defaults.starvationSeconds == 30


def test_queue_overlay_order_independent_of_keys() -> None:
    a = load_config("queues: {q: {cooldownSeconds: 1}}\ndefaults: {minRuntimeSeconds: 2}\n")
    assert a.queue_policy("q").minRuntimeSeconds == 2 and a.queue_policy("q").cooldownSeconds == 1


def test_zero_values_allowed() -> None:
    cfg = parse_config({"defaults": {"cooldownSeconds": 0, "maxEvictionsPerCycle": 0, "maxScaleUpPerCycle": 0,
                                     "starvationSeconds": 0, "minRuntimeSeconds": 0}})
    assert cfg.defaults.maxEvictionsPerCycle == 0


def test_interval_accepts_float() -> None:
    assert parse_config({"agent": {"intervalSeconds": 0.5}}).agent.intervalSeconds == 0.5


def test_gating_disabled() -> None:
    assert parse_config({"gating": {"enabled": False}}).gating.enabled is False


@pytest.mark.parametrize(
    ("queue", "path"),
    [
        pytest.param({"minScaleUpGain": -0.1}, "queues.q.minScaleUpGain", id="negative-gain"),
        pytest.param({"minScaleUpGain": "half"}, "queues.q.minScaleUpGain", id="text-gain"),
        pytest.param({"minScaleUpGain": float("nan")}, "queues.q.minScaleUpGain", id="nan-gain"),
        pytest.param({"minScaleUpGain": float("inf")}, "queues.q.minScaleUpGain", id="inf-gain"),
        pytest.param({"scaleUpSnoozeSeconds": -1}, "queues.q.scaleUpSnoozeSeconds", id="negative-snooze"),
        pytest.param({"scaleUpSnoozeSeconds": 1.5}, "queues.q.scaleUpSnoozeSeconds", id="float-snooze"),
        pytest.param({"scaleUpSnoozeSeconds": True}, "queues.q.scaleUpSnoozeSeconds", id="bool-snooze"),
        pytest.param({"firstRendezvousSeconds": -5}, "queues.q.firstRendezvousSeconds", id="negative-rendezvous"),
        pytest.param({"scaleUpAfterCheckpointSeconds": -1}, "queues.q.scaleUpAfterCheckpointSeconds",
                     id="negative-checkpoint-window"),
        pytest.param({"scaleUpAfterCheckpointSeconds": "5m"}, "queues.q.scaleUpAfterCheckpointSeconds",
                     id="text-checkpoint-window"),
    ],
)
def test_restart_settings_validated_strictly(queue: dict[str, Any], path: str) -> None:
    (problem,) = _problems({"queues": {"q": queue}})
    assert problem.startswith(f"{path}:"), problem


def test_restart_settings_per_queue() -> None:
    cfg = parse_config({"defaults": {"minScaleUpGain": 1, "cooldownSeconds": 120},
                        "queues": {"q": {"minScaleUpGain": 0.25, "scaleUpSnoozeSeconds": 900},
                                   "r": {"scaleUpSnoozeSeconds": None, "firstRendezvousSeconds": 60}}})
    assert cfg.defaults.minScaleUpGain == 1 and cfg.defaults.snooze_seconds() == 120  # null: the cooldown
    q, r = cfg.queue_policy("q"), cfg.queue_policy("r")
    assert (q.minScaleUpGain, q.snooze_seconds(), q.firstRendezvousSeconds) == (0.25, 900, 30)
    assert (r.minScaleUpGain, r.snooze_seconds(), r.firstRendezvousSeconds) == (1, 120, 60)


@pytest.mark.parametrize(("doc", "plugin", "hierarchy"), [
    ({}, "proportion", False),
    ({"shares": {"plugin": "capacity"}}, "capacity", False),
    ({"shares": {"plugin": "capacity", "hierarchy": True}}, "capacity", True),
    ({"shares": {"plugin": "proportion", "hierarchy": False}}, "proportion", False),
])
def test_shares(doc: dict[str, Any], plugin: str, hierarchy: bool) -> None:
    cfg = parse_config(doc)
    assert (cfg.shares.plugin, cfg.shares.hierarchy) == (plugin, hierarchy)


def test_notice_seconds_default_and_per_queue() -> None:
    assert parse_config({}).defaults.noticeSeconds == 60  # a minute to checkpoint (issue 38's judge)
    cfg = load_config("defaults: {noticeSeconds: 30}\nqueues: {research: {noticeSeconds: 120}, batch: {}}\n")
    assert cfg.queue_policy("research").noticeSeconds == 120
    assert cfg.queue_policy("batch").noticeSeconds == 30 and cfg.queue_policy("other").noticeSeconds == 30
    assert parse_config({"defaults": {"noticeSeconds": 86_400}}).defaults.noticeSeconds == 86_400
    with pytest.raises(ConfigError) as err:
        parse_config({"defaults": {"noticeSeconds": 90_000}})
    assert err.value.problems == ["defaults.noticeSeconds: must be <= 86400, got 90000"]
