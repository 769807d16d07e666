"""What every subcommand shares (``elastic_controller/cli/common.py``): a bad ``--config`` exits 2
before anything else happens, naming the command and every bad path."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic_controller.cli import SUBCOMMANDS, main

BAD = "defaults:\n  cooldownSeconds: -1\n  maxEvictionsPerCycle: many\nagent: {intervalSeconds: 0}\n"
SNAPSHOT = '{"apiVersion": "v1", "kind": "List", "items": []}'


@pytest.mark.parametrize(("command", "extra"), [
    ("plan", ["--from", "{snapshot}"]),
    ("status", ["--kubeconfig", "/nonexistent/kubeconfig"]),
    ("queues", ["--kubeconfig", "/nonexistent/kubeconfig"]),
    ("release-gates", ["--all", "--kubeconfig", "/nonexistent/kubeconfig"]),
    ("controller", ["--kubeconfig", "/nonexistent/kubeconfig"]),
    ("simulate", ["--example", "--out", "{out}"]),
])
def test_a_bad_config_exits_2_listing_every_bad_path(command: str, extra: list[str], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(BAD)
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(SNAPSHOT)
    args = [a.format(snapshot=snapshot, out=tmp_path / "out") for a in extra]
    assert main([command, "--config", str(config), *args]) == 2
    err = capsys.readouterr().err
    assert f"volcano-elastic {command}: " in err
    for path in ("defaults.cooldownSeconds", "defaults.maxEvictionsPerCycle", "agent.intervalSeconds"):
        assert path in err, (path, err)
    assert not (tmp_path / "out").exists()  # nothing ran


def test_every_subcommand_has_one_module_in_the_cli_package() -> None:
    assert {name: module for name, module in SUBCOMMANDS.items() if name != "webhook"} == {
        "controller": "elastic_controller.cli.controller", "plan": "elastic_controller.cli.plan",
        "status": "elastic_controller.cli.status", "queues": "elastic_controller.cli.queues",
        "release-gates": "elastic_controller.cli.release_gates",
        "certs": "elastic_controller.cli.certs", "simulate": "elastic_controller.cli.simulate"}
