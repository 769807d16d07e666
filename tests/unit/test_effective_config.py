"""Issue 40, high 1: ``status`` and ``queues`` decide with the configuration the controller runs with
(its ConfigMap), say where it came from, let ``--config`` override it, and say plainly when it cannot be
read (the built-in defaults then, with a warning). Against the in-memory API server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.cli import main
from elastic_controller.cli.effective_config import DEPLOYMENTS, from_cluster
from elastic_controller.kube.errors import ForbiddenError
from elastic_controller.kube.fake import FakeKube
from elastic_controller.kube.resources import CONFIGMAPS
from tests.harness.examples import PLANNED_AT, example_items
from tests.harness.statuscli import _a_kubeconfig, rows_of, serve  # noqa: F401 (a fixture)

NS = "volcano-elastic-system"
# The admin's configuration: vision's jobs cool down for 60 s, not the default 300 s. In the
# cooldown-blocks-eviction example team-vision/resnet was scaled 100 s before PLANNED_AT: with the defaults it is
# in cooldown (the gang waits), with the admin's config it is not (the agent evicts for the gang).
ADMIN_CONFIG = "queues:\n  vision: {cooldownSeconds: 60}\n"
GANG = "team-nlp/bert"


def configmap(name: str = "volcano-elastic-config", text: str = ADMIN_CONFIG) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS},
            "data": {"config.yaml": text}}


def controller(mounted: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "volcano-elastic-controller", "namespace": NS},
            "spec": {"template": {"spec": {"volumes": [{"name": "tmp", "emptyDir": {}},
                                                       {"name": "config", "configMap": {"name": mounted}}]}}}}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--now", PLANNED_AT])
    out, err = capsys.readouterr()
    return code, out, err


def status_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[dict[str, Any], str]:
    code, out, err = run(capsys, "status", "--volcano-scheduler-configmap", "", "-o", "json", *args)
    assert code == 0, err
    return dict(json.loads(out)), err


def test_plain_status_decides_with_the_controllers_configmap(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    kube = serve(monkeypatch, *example_items("cooldown-blocks-eviction"))
    kube.add(CONFIGMAPS, configmap())
    plain, err = status_json(capsys)
    assert err == ""
    assert plain["configSource"] == f"ConfigMap {NS}/volcano-elastic-config (what the controller runs with)"
    assert rows_of(plain)[GANG]["lastDecision"].startswith("now: evict: "), rows_of(plain)[GANG]
    # --config still overrides, and says so
    file = tmp_path / "defaults.yaml"
    file.write_text("{}\n")
    overridden, _ = status_json(capsys, "--config", str(file))
    assert overridden["configSource"] == f"file {file} (--config)"
    assert rows_of(overridden)[GANG]["lastDecision"].startswith("now: wait: ")
    # the table says where it came from, first
    code, out, _ = run(capsys, "status", "--volcano-scheduler-configmap", "")
    assert code == 0 and out.splitlines()[0] == f"CONFIG ConfigMap {NS}/volcano-elastic-config (what the " \
                                                "controller runs with)"


def test_queues_shows_the_controllers_policy(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    kube = serve(monkeypatch, *example_items("cooldown-blocks-eviction"))
    kube.add(CONFIGMAPS, configmap())
    code, out, err = run(capsys, "queues", "-o", "json")
    doc = json.loads(out)
    vision = next(q for q in doc["queues"] if q["name"] == "vision")
    assert code == 0 and err == "" and doc["configSource"].startswith(f"ConfigMap {NS}/volcano-elastic-config")
    assert (vision["policy"]["cooldownSeconds"], vision["policySource"]) == (60, "queues.vision")
    code, out, _ = run(capsys, "queues")
    assert out.rstrip().splitlines()[-1].startswith(f"CONFIG ConfigMap {NS}/volcano-elastic-config")
    assert any(line.startswith("vision ") and "60s" in line and line.endswith("queues.vision")
               for line in out.splitlines()), out


def test_a_kustomize_install_is_found_through_the_controllers_deployment(monkeypatch: pytest.MonkeyPatch,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """``kubectl apply -k`` hashes the ConfigMap's name: the one the controller mounts is read."""
    kube = serve(monkeypatch, *example_items("cooldown-blocks-eviction"))
    kube.add(CONFIGMAPS, configmap("volcano-elastic-config-old1234567", "{}\n"))  # left over by an earlier apply
    kube.add(CONFIGMAPS, configmap("volcano-elastic-config-5fh7c2m9kt"))
    kube.add(DEPLOYMENTS, controller("volcano-elastic-config-5fh7c2m9kt"))
    doc, err = status_json(capsys)
    assert err == "" and doc["configSource"].startswith(f"ConfigMap {NS}/volcano-elastic-config-5fh7c2m9kt ")
    assert rows_of(doc)[GANG]["lastDecision"].startswith("now: evict: ")


def test_config_from_names_another_namespace(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    kube = serve(monkeypatch, *example_items("cooldown-blocks-eviction"))
    kube.add(CONFIGMAPS, {**configmap(), "metadata": {"name": "volcano-elastic-config", "namespace": "ops"}})
    doc, err = status_json(capsys, "--config-from", "ops/volcano-elastic-config")
    assert err == "" and doc["configSource"].startswith("ConfigMap ops/volcano-elastic-config ")
    assert rows_of(doc)[GANG]["lastDecision"].startswith("now: evict: ")


@pytest.mark.parametrize(("objects", "said"), [
    ([], f"ConfigMap {NS}/volcano-elastic-config not found, nor a Deployment {NS}/volcano-elastic-controller: "
         f"is volcano-elastic installed in namespace {NS}?"),
    ([configmap(text="queues: {vision: {cooldownSeconds: soon}}\n")],
     f"ConfigMap {NS}/volcano-elastic-config is not a valid ElasticConfig (the controller refuses it too): "
     "queues.vision.cooldownSeconds: "),
    ([{**configmap(), "data": {"other.yaml": ADMIN_CONFIG}}], f"ConfigMap {NS}/volcano-elastic-config has no key "
                                                              "config.yaml"),
    ([controller("gone")], f"cannot read ConfigMap {NS}/gone (mounted by Deployment {NS}/volcano-elastic-controller)"),
], ids=["absent", "invalid", "no-key", "mounted-one-gone"])
def test_what_cannot_be_read_is_said_and_the_defaults_are_used(monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str],
                                                               objects: list[dict[str, Any]], said: str) -> None:
    kube = serve(monkeypatch, *example_items("cooldown-blocks-eviction"))
    for obj in objects:
        kube.add(DEPLOYMENTS if obj["kind"] == "Deployment" else CONFIGMAPS, obj)
    doc, err = status_json(capsys)
    assert err.startswith(f"volcano-elastic status: warning: {said}"), err
    assert "using the built-in defaults" in err and len(err.splitlines()) == 1
    assert doc["configSource"] == "defaults (built in)"
    assert rows_of(doc)[GANG]["lastDecision"].startswith("now: wait: ")


def as_a_viewer(kube: FakeKube, granted: set[str]) -> FakeKube:
    """``kube`` as seen by someone who may get only the objects named in ``granted`` (RBAC answers 403
    before it looks whether the object exists)."""
    get = kube.get

    def checked(res: Any, name: str, namespace: str | None = None) -> Any:
        if name not in granted:
            raise ForbiddenError(f"get {res.plural} {name}: 403 Forbidden", 403)
        return get(res, name, namespace)

    kube.get = checked  # type: ignore[method-assign]
    return kube


def test_a_viewer_of_a_kustomize_install_reads_the_hashed_configmap() -> None:
    """The kustomize Role grants the hashed name only: the plain name's 403 is no dead end."""
    kube = FakeKube()
    kube.add(CONFIGMAPS, configmap("volcano-elastic-config-5fh7c2m9kt"))
    kube.add(DEPLOYMENTS, controller("volcano-elastic-config-5fh7c2m9kt"))
    choice = from_cluster(as_a_viewer(kube, {"volcano-elastic-controller", "volcano-elastic-config-5fh7c2m9kt"}),
                          f"{NS}/volcano-elastic-config")
    assert choice.warning is None and choice.config.queue_policy("vision").cooldownSeconds == 60
    assert choice.source == f"ConfigMap {NS}/volcano-elastic-config-5fh7c2m9kt (what the controller runs with)"


@pytest.mark.parametrize(("granted", "what"), [
    (set(), f"ConfigMap {NS}/volcano-elastic-config or Deployment {NS}/volcano-elastic-controller"),
    ({"volcano-elastic-controller"}, f"ConfigMap {NS}/volcano-elastic-config-5fh7c2m9kt"),
], ids=["nothing", "deployment-only"])
def test_a_forbidden_configmap_names_the_role_to_bind(granted: set[str], what: str) -> None:
    kube = FakeKube()
    kube.add(CONFIGMAPS, configmap("volcano-elastic-config-5fh7c2m9kt"))
    kube.add(DEPLOYMENTS, controller("volcano-elastic-config-5fh7c2m9kt"))
    choice = from_cluster(as_a_viewer(kube, granted), f"{NS}/volcano-elastic-config")
    assert choice.source == "defaults (built in)" and choice.warning is not None
    assert choice.warning.startswith(f"not allowed to read {what}: the Role volcano-elastic-viewer in namespace {NS} "
                                     f"grants it (kubectl -n {NS} create rolebinding NAME "
                                     "--role=volcano-elastic-viewer --group=GROUP); using the built-in defaults")


def test_a_bad_config_from_is_refused_before_connecting(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    kube = serve(monkeypatch, *example_items("cooldown-blocks-eviction"))
    code, _, err = run(capsys, "status", "--config-from", "volcano-elastic-config")
    assert code == 2 and err == ("volcano-elastic status: --config-from 'volcano-elastic-config' is not "
                                 "NAMESPACE/NAME\n")
    assert not kube.calls


def test_empty_config_from_means_the_defaults_without_a_warning(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    kube = serve(monkeypatch, *example_items("cooldown-blocks-eviction"))
    kube.add(CONFIGMAPS, configmap())
    doc, err = status_json(capsys, "--config-from", "")
    assert err == "" and doc["configSource"] == "defaults (built in): --config-from ''"
    assert rows_of(doc)[GANG]["lastDecision"].startswith("now: wait: ")


def test_queues_from_a_dump_says_it_uses_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    dump = Path(__file__).resolve().parents[2] / "examples" / "plan" / "cooldown-blocks-eviction.json"
    code, out, _ = run(capsys, "queues", "--from", str(dump), "-o", "json")
    assert code == 0 and json.loads(out)["configSource"] == "defaults (built in): --from reads no cluster"


def test_a_viewer_where_nothing_is_installed_is_asked_whether_it_is() -> None:
    """The plain name is refused (the Role names the hashed one) and there is no controller Deployment
    (a box whose controller runs as a process): no advice to bind what is bound."""
    kube = FakeKube()
    kube.add(CONFIGMAPS, configmap("volcano-elastic-config-5fh7c2m9kt"))
    choice = from_cluster(as_a_viewer(kube, {"volcano-elastic-controller", "volcano-elastic-config-5fh7c2m9kt"}),
                          f"{NS}/volcano-elastic-config")
    assert choice.source == "defaults (built in)" and choice.warning is not None
    assert choice.warning.startswith(f"ConfigMap {NS}/volcano-elastic-config is not readable and there is no "
                                     f"Deployment {NS}/volcano-elastic-controller naming another: is volcano-elastic "
                                     f"installed in namespace {NS}?")
