"""The manifests against a real API server (the "core" box: etcd, kube-apiserver,
kube-controller-manager, every CRD; no scheduler, no nodes).

- Every object of every overlay is accepted by ``kubectl apply --server-side --dry-run=server``
  (the ``local`` overlay after the documented ``certs inject-ca`` step).
- Least privilege is enough, and no more: ``kubectl auth can-i --as=<ServiceAccount>`` for every
  verb/resource the controller, agent and certgen use ("yes") and for what they must never do
  ("no", pod delete first of all); then the controller and the certgen script really run with a
  token of their ServiceAccount and must do their job without a single 403.

The ``local`` overlay's namespace, ServiceAccounts, RBAC and ConfigMap are applied for real
(idempotently, left in the session's box for other tests); its webhook configurations are
only dry-run, because registering them for real (failurePolicy Fail, nothing listening on
127.0.0.1:8443) would reject every PyTorchJob that later tests create.
"""

from __future__ import annotations

import base64
import copy
import datetime
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.localbox.ours import webhook_argv
from tests.harness import appliedbox
from tests.harness.appliedbox import (
    WEBHOOK_KINDS,
    accepted,
    answers_ready,
    apply,
    can_i,
    kubectl,
    operator_pod,
    sa_kubeconfig,
    wait_for,
)
from tests.harness.manifests import (
    CONTROLLER_FORBIDDEN,
    CONTROLLER_NAMESPACED_NEEDS,
    CONTROLLER_NEEDS,
    LEASE_NAME,
    MANIFESTS,
    NAMESPACE,
    ROOT,
    SA_CERTGEN,
    SA_CONTROLLER,
    SA_WEBHOOK,
    example_job,
    render,
)

installed = appliedbox.installed  # a fixture

pytestmark = pytest.mark.integration

SECRET = "volcano-elastic-webhook-tls"


# ---------------------------------------------------------------------- dry runs
def test_local_overlay_with_injected_ca_is_accepted(box: Any, installed: list[dict[str, Any]]) -> None:
    rendered = yaml.safe_dump_all(installed, sort_keys=False)
    inject = subprocess.run([sys.executable, "-m", "elastic_controller", "certs", "inject-ca", "--ca",
                             str(box.ca_file), "-"], input=rendered, capture_output=True, text=True, timeout=60)
    assert inject.returncode == 0, inject.stderr
    assert "caBundle set on 2 webhook(s)" in inject.stderr
    out = accepted(apply(box, inject.stdout, dry_run=True), "overlays/local (with caBundle)")
    assert len(re.findall(r"serverside-applied \(server dry run\)", out)) == len(installed), out


@pytest.mark.parametrize("kustomization", ["base", "overlays/kind", "overlays/cert-manager"])
def test_cluster_overlays_are_accepted(box: Any, installed: list[dict[str, Any]], kustomization: str) -> None:
    objs = render(kustomization)
    # cert-manager's own kinds need cert-manager's CRDs, which the box does not install
    ours = [o for o in objs if not o["apiVersion"].startswith("cert-manager.io/")]
    out = accepted(apply(box, ours, dry_run=True), kustomization)
    assert len(re.findall(r"\(server dry run\)", out)) == len(ours), out


def test_examples_are_accepted(box: Any, installed: list[dict[str, Any]], namespace: str) -> None:
    examples = MANIFESTS / "examples"
    for name in ("queues.yaml", "namespaces.yaml"):
        accepted(apply(box, (examples / name).read_text(), dry_run=True), name)
    for name in ("pytorchjob-elastic.yaml", "pytorchjob-static.yaml"):
        docs = [d for d in yaml.safe_load_all((examples / name).read_text()) if d]
        for doc in docs:  # the job, and its ServiceAccount and RBAC where it has them
            doc["metadata"]["namespace"] = namespace  # the department namespaces are not created here
            for subject in doc.get("subjects") or []:
                subject["namespace"] = namespace
        out = accepted(apply(box, docs, dry_run=True), name)
        assert len(re.findall(r"\(server dry run\)", out)) == len(docs), out


def test_controller_may_do_everything_it_does(box: Any, installed: list[dict[str, Any]]) -> None:
    missing = [need for need in CONTROLLER_NEEDS if not can_i(box, SA_CONTROLLER, need[2], need[0], need[1])]
    missing += [need for need in CONTROLLER_NAMESPACED_NEEDS
                if not can_i(box, SA_CONTROLLER, need[2], need[0], need[1], namespace=NAMESPACE, name=need[3])]
    assert not missing, f"the controller's ServiceAccount cannot: {missing}"


def test_controller_may_not_do_more(box: Any, installed: list[dict[str, Any]]) -> None:
    sa = SA_CONTROLLER
    allowed = [f for f in CONTROLLER_FORBIDDEN if can_i(box, sa, f[2], f[0], f[1])]
    # pod delete: granted for issue 36 T13 (a worker past a tenant's PDB), bounded by the admission
    # policy volcano-elastic-controller-pod-deletes (tests/integration/test_pdb_passed.py tries it);
    # deletecollection in any namespace, including our own and kube-system, never
    for ns in (NAMESPACE, "kube-system", "default"):
        if can_i(box, sa, "deletecollection", "", "pods", namespace=ns):
            allowed.append(("", "pods", f"deletecollection in {ns}"))
    # the Lease: only ours, only in our namespace
    if can_i(box, sa, "update", "coordination.k8s.io", "leases", namespace=NAMESPACE, name="someone-elses"):
        allowed.append(("coordination.k8s.io", "leases", "update another Lease"))
    if can_i(box, sa, "create", "coordination.k8s.io", "leases", namespace="kube-system"):
        allowed.append(("coordination.k8s.io", "leases", "create in kube-system"))
    assert not allowed, f"the controller's ServiceAccount may do more than it needs: {allowed}"


def test_webhook_has_no_api_access(box: Any, installed: list[dict[str, Any]]) -> None:
    asks = [("get", "", "pods"), ("list", "", "configmaps"), ("get", "", "secrets"),
            ("patch", "", "pods"), ("list", "kubeflow.org", "pytorchjobs"), ("create", "", "events")]
    allowed = [a for a in asks if can_i(box, SA_WEBHOOK, *a)]
    allowed += [a for a in asks if can_i(box, SA_WEBHOOK, *a, namespace=NAMESPACE)]
    assert not allowed, f"the webhook's ServiceAccount can: {allowed}"


def test_certgen_touches_one_secret_and_two_webhook_configs(box: Any, installed: list[dict[str, Any]]) -> None:
    sa, adm = SA_CERTGEN, "admissionregistration.k8s.io"
    yes = [
        ("create", "", "secrets", NAMESPACE, None),
        *((v, "", "secrets", NAMESPACE, SECRET) for v in ("get", "update", "patch")),
        ("patch", adm, "mutatingwebhookconfigurations", None, "volcano-elastic"),
        ("patch", adm, "validatingwebhookconfigurations", None, "volcano-elastic"),
    ]
    no = [
        ("get", "", "secrets", NAMESPACE, "another-secret"),
        ("list", "", "secrets", NAMESPACE, None),
        ("delete", "", "secrets", NAMESPACE, SECRET),
        ("create", "", "secrets", "default", None),
        ("get", "", "secrets", "kube-system", None),
        ("patch", adm, "mutatingwebhookconfigurations", None, "someone-elses"),
        ("get", adm, "mutatingwebhookconfigurations", None, "volcano-elastic"),
        ("delete", adm, "validatingwebhookconfigurations", None, "volcano-elastic"),
        ("get", "", "pods", "default", None),
    ]

    def ask(verb: str, group: str, resource: str, ns: str | None, name: str | None) -> bool:
        # cluster-scoped resources: can-i without a namespace flag would mean "all namespaces"
        return can_i(box, sa, verb, group, resource, namespace=ns or "default", name=name)

    assert [q for q in yes if not ask(*q)] == []
    assert [q for q in no if ask(*q)] == []


def forbidden_lines(log: Path) -> list[str]:
    """The log lines of RBAC denials. A 403 for content in a namespace being deleted (another test's,
    as its namespace fixture deletes it in the background: the controller sees the whole box) is the
    NamespaceLifecycle admission plugin, not RBAC."""
    return [ln for ln in log.read_text(errors="replace").splitlines()
            if re.search(r"\b403\b|forbidden", ln, re.IGNORECASE) and "because it is being terminated" not in ln]


def get_json(box: Any, *args: str) -> dict[str, Any] | None:
    proc = kubectl(box, "get", *args, "-o", "json")
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def test_controller_works_with_exactly_its_rbac(box: Any, installed: list[dict[str, Any]], namespace: str,
                                                 box_process: Callable[..., Any], tmp_path: Path) -> None:
    kc = sa_kubeconfig(box, SA_CONTROLLER, tmp_path / "controller.kubeconfig")
    job = example_job("pytorchjob-elastic.yaml")
    job["metadata"]["namespace"] = namespace
    accepted(apply(box, [job], dry_run=False), "the example PyTorchJob")
    proc = box_process("controller-as-sa", [
        sys.executable, "-m", "elastic_controller", "controller", f"--kubeconfig={kc}",
        f"--config={MANIFESTS / 'base' / 'config.yaml'}", "--http-port=0", f"--lease-name={LEASE_NAME}",
        f"--lease-namespace={NAMESPACE}",
    ], env={"KUBECONFIG": str(kc)})
    log = Path(proc.log)
    name = job["metadata"]["name"]
    # a Lease held by a controller of an earlier test expires within its 15 s duration
    pg = wait_for("the PodGroup the controller creates", lambda: get_json(
        box, "podgroups.scheduling.volcano.sh", name, f"--namespace={namespace}"), 90, log)
    # 2..4 workers: admitted whole under the shipped wholeGangUpTo (4): its gang is its max
    assert pg["spec"]["minMember"] == job["spec"]["elasticPolicy"]["maxReplicas"]
    # the job's ServiceAccount may patch exactly its pods: granted by the controller as itself, which
    # RBAC allows only because its ClusterRole holds pods patch and roles/rolebindings create
    role = wait_for("the checkpoint Role the controller grants", lambda: get_json(
        box, "roles.rbac.authorization.k8s.io", f"{name}-volcano-elastic-checkpoint", f"--namespace={namespace}"),
        30, log)
    replicas = job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"]
    assert role["rules"][0]["resourceNames"] == [f"{name}-worker-{i}" for i in range(replicas)]
    binding = get_json(box, "rolebindings.rbac.authorization.k8s.io", f"{name}-volcano-elastic-checkpoint",
                       f"--namespace={namespace}")
    assert binding is not None and binding["subjects"][0]["name"] == \
        job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["serviceAccountName"]
    owner = pg["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "PyTorchJob" and owner["blockOwnerDeletion"] is True
    lease = get_json(box, "leases.coordination.k8s.io", LEASE_NAME, f"--namespace={NAMESPACE}")
    assert lease and lease["spec"].get("holderIdentity")
    time.sleep(3)  # a few agent cycles over pods, nodes, queues, PodGroups, jobs
    assert forbidden_lines(log) == [], "the controller hit RBAC denials"


def test_certgen_script_works_with_exactly_its_rbac(box: Any, installed: list[dict[str, Any]],
                                                     tmp_path: Path) -> None:
    for kind in WEBHOOK_KINDS:
        if kubectl(box, "get", kind.lower(), "volcano-elastic").returncode == 0:
            pytest.skip(f"a {kind} volcano-elastic is registered by someone else in this box: not touching it")
    if kubectl(box, "get", "secret", SECRET, f"--namespace={NAMESPACE}").returncode == 0:
        pytest.skip(f"Secret {NAMESPACE}/{SECRET} exists already in this box: not touching it")
    # Register our two configurations for real, but matching no namespace: the script needs them
    # to exist, and the box must keep admitting PyTorchJobs of other tests.
    hooks = copy.deepcopy([o for o in installed if o["kind"] in WEBHOOK_KINDS])
    for o in hooks:
        for w in o["webhooks"]:
            w["namespaceSelector"] = {"matchLabels": {"volcano-elastic.io/manifest-test": "never-matches"}}
    accepted(apply(box, hooks, dry_run=False), "webhook configurations")
    kc = sa_kubeconfig(box, SA_CERTGEN, tmp_path / "certgen.kubeconfig")
    command = [sys.executable, "-m", "elastic_controller", "certs", "bootstrap"]  # what the Job runs
    env = {"KUBECONFIG": str(kc), "POD_NAMESPACE": NAMESPACE, "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    try:
        first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert first.returncode == 0, first.stderr
        secret = get_json(box, "secret", SECRET, f"--namespace={NAMESPACE}")
        assert secret is not None and secret["type"] == "kubernetes.io/tls"
        assert set(secret["data"]) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
        ca = secret["data"]["ca.crt"]
        from cryptography import x509

        cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.DNSName)
        assert f"volcano-elastic-webhook.{NAMESPACE}.svc" in sans
        assert cert.not_valid_after_utc > datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=300)
        for kind in WEBHOOK_KINDS:
            obj = get_json(box, kind.lower(), "volcano-elastic")
            assert obj is not None and [w["clientConfig"].get("caBundle") for w in obj["webhooks"]] == [ca], kind
        # a second run keeps the valid certificate and re-asserts the same caBundle
        second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 0, second.stderr
        assert "kept" in second.stderr
        again = get_json(box, "secret", SECRET, f"--namespace={NAMESPACE}")
        assert again is not None and again["data"] == secret["data"]
    finally:
        for kind in WEBHOOK_KINDS:
            kubectl(box, "delete", kind.lower(), "volcano-elastic", "--ignore-not-found")
        kubectl(box, "delete", "secret", SECRET, f"--namespace={NAMESPACE}", "--ignore-not-found")


# ---------------------------------------------------------------------- the local overlay, live
LOCAL_PORT = 8443  # the url the local overlay registers


def dry_run_create(box: Any, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return kubectl(box, "create", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(obj))


def test_local_overlay_webhooks_admit_through_the_url(box: Any, installed: list[dict[str, Any]], namespace: str,
                                                      serving_cert: tuple[Path, Path],
                                                      box_process: Callable[..., Any]) -> None:
    """The local overlay's webhook configurations, registered for real (narrowed to this test's
    namespace), reach a webhook on https://127.0.0.1:8443 and mutate a PyTorchJob pod; with the
    webhook stopped, failurePolicy Fail refuses such pods and nothing else."""
    import socket

    for kind in WEBHOOK_KINDS:
        if kubectl(box, "get", kind.lower(), "volcano-elastic").returncode == 0:
            pytest.skip(f"a {kind} volcano-elastic is registered by someone else in this box: not touching it")
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", LOCAL_PORT)) == 0:
            pytest.skip(f"127.0.0.1:{LOCAL_PORT} is taken: the local overlay's webhook URL cannot be served")
    cert, key = serving_cert
    argv = webhook_argv(cert, key, LOCAL_PORT, MANIFESTS / "base" / "config.yaml")
    proc = box_process("webhook-local-overlay", argv)
    wait_for("the webhook on 127.0.0.1:8443", answers_ready(LOCAL_PORT, box.ca_file), 30, Path(proc.log))
    hooks = copy.deepcopy([o for o in installed if o["kind"] in WEBHOOK_KINDS])
    for o in hooks:
        for w in o["webhooks"]:
            w["clientConfig"]["caBundle"] = box.ca_bundle
            w["namespaceSelector"]["matchExpressions"].append(
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace]})
    try:
        accepted(apply(box, hooks, dry_run=False), "the local overlay's webhook configurations")

        def mutated() -> dict[str, Any] | None:
            out = dry_run_create(box, operator_pod(namespace, "j", 3, "2:8"))
            return json.loads(out.stdout) if out.returncode == 0 else None

        pod = wait_for("the elastic pod mutated through the URL", mutated, 30, Path(proc.log))
        assert pod["spec"]["schedulerName"] == "volcano"
        assert pod["spec"]["schedulingGates"] == [{"name": "volcano-elastic.io/scale-up"}]
        assert pod["metadata"]["annotations"]["volcano-elastic.io/role"] == "elastic"
        assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "j"
        job = example_job("pytorchjob-elastic.yaml")
        job["metadata"]["namespace"] = namespace
        job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = "Never"
        denied = dry_run_create(box, job)
        assert denied.returncode != 0 and "restartPolicy is Never" in denied.stderr, denied.stderr

        box.stop(Path(proc.log).stem)  # the webhook goes away: Fail refuses its pods, only its pods
        refused = wait_for("a refusal with the webhook down", lambda: (
            lambda r: r if r.returncode != 0 else None)(dry_run_create(box, operator_pod(namespace, "j", 1, "2:8"))),
            30)
        assert "mutate-pods.volcano-elastic.io" in refused.stderr, refused.stderr
        other = dry_run_create(box, operator_pod(namespace, "j", 1, "2:8", labelled=False))
        assert other.returncode == 0, f"a pod without the operator label depends on our webhook: {other.stderr}"
    finally:
        for kind in WEBHOOK_KINDS:
            kubectl(box, "delete", kind.lower(), "volcano-elastic", "--ignore-not-found")


def test_status_and_release_gates_work_as_the_controller(box: Any, installed: list[dict[str, Any]],
                                                         tmp_path: Path) -> None:
    """docs/operations.md runs them inside the controller's pod, i.e. with its ServiceAccount."""
    kc = sa_kubeconfig(box, SA_CONTROLLER, tmp_path / "controller.kubeconfig")
    config = str(MANIFESTS / "base" / "config.yaml")
    for argv in (["status", "--output", "json"], ["release-gates", "--all", "--dry-run"]):
        proc = subprocess.run([sys.executable, "-m", "elastic_controller", *argv, f"--kubeconfig={kc}",
                               f"--config={config}"], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"{argv[0]} as the controller: {proc.stderr}"
        assert not re.search(r"\b403\b|forbidden", proc.stdout + proc.stderr, re.IGNORECASE), proc.stderr


# ---------------------------------------------------------------------- the viewer role
VIEWER_SA = "volcano-elastic-viewer-test"
EXAMPLES = ROOT / "examples" / "plan"
_TIME = re.compile(r'"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)"')


@pytest.fixture
def viewer_kubeconfig(box: Any, installed: list[dict[str, Any]], tmp_path: Path) -> Any:
    """A ServiceAccount bound to nothing but the shipped volcano-elastic-viewer ClusterRole and Role, as
    an admin binds a researchers' group (docs/operations.md)."""
    objs = [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": VIEWER_SA, "namespace": NAMESPACE}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": VIEWER_SA},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": "volcano-elastic-viewer"},
             "subjects": [{"kind": "ServiceAccount", "name": VIEWER_SA, "namespace": NAMESPACE}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": VIEWER_SA, "namespace": NAMESPACE},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "volcano-elastic-viewer"},
             "subjects": [{"kind": "ServiceAccount", "name": VIEWER_SA, "namespace": NAMESPACE}]}]
    accepted(apply(box, objs, dry_run=False), "the viewer's bindings")
    try:
        yield sa_kubeconfig(box, VIEWER_SA, tmp_path / "viewer.kubeconfig")
    finally:
        kubectl(box, "delete", "rolebinding", VIEWER_SA, f"--namespace={NAMESPACE}", "--ignore-not-found")
        kubectl(box, "delete", "clusterrolebinding", VIEWER_SA, "--ignore-not-found")
        kubectl(box, "delete", "serviceaccount", VIEWER_SA, f"--namespace={NAMESPACE}", "--ignore-not-found")


def served_example(name: str, suffix: str, at: datetime.datetime) -> list[dict[str, Any]]:
    """A bundled plan example as objects to create on the shared box: its names made unique (nodes,
    namespaces, queues, priority class) and its times moved so that the example's 13:00 is ``at``."""
    text = (EXAMPLES / f"{name}.json").read_text()
    for old, new in (("team-vision", f"tv-{suffix}"), ("team-nlp", f"tn-{suffix}"), ('"vision"', f'"qv-{suffix}"'),
                     ('"nlp"', f'"qn-{suffix}"'), ('"research"', f'"pc-{suffix}"'), ('"gpu-', f'"n{suffix}-')):
        text = text.replace(old, new)
    shift = at - datetime.datetime(2026, 1, 1, 13, tzinfo=datetime.UTC)

    def moved(m: re.Match[str]) -> str:
        t = datetime.datetime.fromisoformat(m.group(1).replace("Z", "+00:00")) + shift
        return '"' + t.strftime("%Y-%m-%dT%H:%M:%SZ") + '"'

    return list(json.loads(_TIME.sub(moved, text))["items"])


def create_for_real(box: Any, objs: list[dict[str, Any]]) -> None:
    """Create ``objs`` (their namespaces first), then write their status through the subresource."""
    namespaces = sorted({o["metadata"]["namespace"] for o in objs if o["metadata"].get("namespace")})
    first = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in namespaces]
    first += [o for o in objs if o["kind"] == "PriorityClass"]
    accepted(apply(box, first, dry_run=False), "namespaces and priority class")
    for ns in namespaces:  # pods need the namespace's default ServiceAccount (kube-controller-manager)
        wait_for(f"serviceaccount default in {ns}",
                 lambda ns=ns: kubectl(box, "get", "serviceaccount", "default", f"--namespace={ns}").returncode == 0,
                 60)
    rest = []
    for o in objs:
        if o["kind"] == "PriorityClass":
            continue
        o = copy.deepcopy(o)
        for key in ("uid", "creationTimestamp", "resourceVersion"):
            o["metadata"].pop(key, None)
        rest.append(o)
    # Nodes' and pods' status is a subresource (written after); Volcano's CRDs keep it in the object.
    sub = ("Node", "Pod")
    accepted(apply(box, [{k: v for k, v in o.items() if k != "status" or o["kind"] not in sub} for o in rest],
                   dry_run=False), "the example")
    for o in rest:
        if o.get("status") and o["kind"] in sub:
            where = [f"--namespace={o['metadata']['namespace']}"] if o["metadata"].get("namespace") else []
            proc = kubectl(box, "patch", o["kind"].lower(), o["metadata"]["name"], *where, "--subresource=status",
                           "--type=merge", "-p", json.dumps({"status": o["status"]}))
            assert proc.returncode == 0, f"{o['kind']} {o['metadata']['name']} status: {proc.stderr}"


@pytest.mark.parametrize(("name", "decision"), [("scale-down-for-gang", "evict"), ("cooldown-blocks-eviction", "wait")])
def test_status_as_a_viewer_plans_on_the_whole_cluster(box: Any, viewer_kubeconfig: Path, name: str,
                                                       decision: str) -> None:
    """Issue 30: ``status -n NS`` gave another decision than cluster-wide (it read one namespace, so
    the nodes looked empty). With only the shipped viewer role, status and queues read what they
    need, and the gang's row is the same with and without ``-n``."""
    import uuid

    suffix = uuid.uuid4().hex[:6]
    at = datetime.datetime.now(datetime.UTC).replace(microsecond=0) + datetime.timedelta(seconds=120)
    objs = served_example(name, suffix, at)
    try:
        create_for_real(box, objs)

        def cli(*argv: str) -> dict[str, Any]:
            proc = subprocess.run([sys.executable, "-m", "elastic_controller", *argv,
                                   f"--kubeconfig={viewer_kubeconfig}", "--now", at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                   "-o", "json"],
                                  capture_output=True, text=True, timeout=120)
            assert proc.returncode == 0, f"{argv} as the viewer: {proc.stderr}"
            assert not re.search(r"\b403\b|forbidden", proc.stderr, re.IGNORECASE), proc.stderr
            return dict(json.loads(proc.stdout))

        gang = f"tn-{suffix}/bert"
        everywhere = {r["job"]: r for rows in cli("status")["queues"].values() for r in rows}
        scoped = {r["job"]: r for rows in cli("status", "-n", f"tn-{suffix}")["queues"].values() for r in rows}
        assert set(scoped) == {gang} and f"tv-{suffix}/resnet" in everywhere
        assert scoped[gang] == everywhere[gang]
        assert scoped[gang]["lastDecision"].startswith(f"now: {decision}: "), scoped[gang]
        queues = {q["name"]: q for q in cli("queues")["queues"]}
        assert queues[f"qv-{suffix}"]["allocated"] == 32 and queues[f"qn-{suffix}"]["elasticJobs"] == 1
        assert not can_i(box, VIEWER_SA, "patch", "", "pods")
        assert not can_i(box, VIEWER_SA, "get", "", "secrets")
    finally:
        # Gone before the next case plans: pods left on this case's deleted nodes are ghosts in every
        # plan of the cluster (CI saw them in the next case's reasons, "on node N (not in the
        # snapshot)"); no kubelet confirms their deletion, so they go at once.
        for ns in (f"tv-{suffix}", f"tn-{suffix}"):
            kubectl(box, "delete", "pods", "--all", f"--namespace={ns}", "--grace-period=0", "--force",
                    "--ignore-not-found")
        for o in objs:
            if o["kind"] in ("Node", "Queue", "PriorityClass"):
                kind = "queues.scheduling.volcano.sh" if o["kind"] == "Queue" else o["kind"].lower()
                kubectl(box, "delete", kind, o["metadata"]["name"], "--ignore-not-found", "--wait=false")
        for ns in (f"tv-{suffix}", f"tn-{suffix}"):
            kubectl(box, "delete", "namespace", ns, "--ignore-not-found", "--wait=false")
