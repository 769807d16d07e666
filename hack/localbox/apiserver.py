"""kube-apiserver: the box's PKI (CA, serving and admin certificates, service-account keys), its
flags (kwok-only vs real-node networking), the admin kubeconfig, and the CRDs it serves."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import yaml

from . import paths, pki, realnode
from .component import BoxLike, Component, Ports, Spec, http_ready
from .procs import BoxError


def make_pki(d: Path) -> None:
    """The box CA, the apiserver's serving certificate, the admin client certificate (in
    system:masters) and the service-account signing key pair, all under `d`."""
    ca = pki.make_ca("volcano-elastic-localbox-ca")
    ca.write(d / "ca.crt", d / "ca.key")
    pki.issue(ca, "kube-apiserver", dns_names=["localhost", "kubernetes", "kubernetes.default",
                                               "kubernetes.default.svc"],
              ips=["127.0.0.1", "10.96.0.1", realnode.GATEWAY]).write(d / "apiserver.crt", d / "apiserver.key")
    pki.issue(ca, "volcano-elastic-admin", orgs=["system:masters"], server=False,
              client=True).write(d / "admin.crt", d / "admin.key")
    priv, pub = pki.rsa_keypair_pem()
    pki._write(d / "sa.key", priv, 0o600)
    pki._write(d / "sa.pub", pub, 0o644)


def issue_serving_cert(pki_dir: Path, out_dir: str | Path, name: str = "webhook",
                       dns_names: list[str] | None = None) -> tuple[Path, Path]:
    """A serving certificate signed by the box CA in `pki_dir`, with an IP SAN for 127.0.0.1."""
    ca = pki.KeyPair((pki_dir / "ca.crt").read_bytes(), (pki_dir / "ca.key").read_bytes())
    out = Path(out_dir)
    crt, key = out / f"{name}.crt", out / f"{name}.key"
    pki.issue(ca, name, dns_names=["localhost", *(dns_names or [])], ips=["127.0.0.1"]).write(crt, key)
    return crt, key


def network_flags(pki_dir: Path, real_nodes: bool) -> list[str]:
    """Kwok-only boxes: everything on 127.0.0.1, no kubelet, no node lifecycle. With real
    nodes: the apiserver is reachable from pods (the bridge's gateway), advertises that
    address for the `kubernetes` Service, talks to kubelets, authorizes them as nodes, mounts
    service-account tokens, and reaches webhook Services through their endpoints."""
    pk = pki_dir
    if not real_nodes:
        return ["--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
                "--authorization-mode=RBAC",
                # no kubelet to mount tokens; no node lifecycle controller to lift not-ready taints
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition"]
    return ["--bind-address=0.0.0.0", f"--advertise-address={realnode.GATEWAY}",
            "--endpoint-reconciler-type=lease", "--authorization-mode=Node,RBAC",
            "--disable-admission-plugins=TaintNodesByCondition", "--enable-aggregator-routing=true",
            f"--kubelet-client-certificate={pk / 'admin.crt'}", f"--kubelet-client-key={pk / 'admin.key'}",
            f"--kubelet-certificate-authority={pk / 'ca.crt'}",
            "--kubelet-preferred-address-types=InternalIP"]


NAME = "kube-apiserver"


def component(pk: Path, real_nodes: bool, ports: Ports) -> Component:
    server = f"https://127.0.0.1:{ports['apiserver']}"
    return Component(NAME, (
        str(paths.binary("kube-apiserver")),
        f"--etcd-servers=http://127.0.0.1:{ports['etcd']}",
        *network_flags(pk, real_nodes),
        f"--secure-port={ports['apiserver']}",
        f"--tls-cert-file={pk / 'apiserver.crt'}", f"--tls-private-key-file={pk / 'apiserver.key'}",
        f"--client-ca-file={pk / 'ca.crt'}",
        f"--service-account-issuer={server}",
        f"--service-account-key-file={pk / 'sa.pub'}",
        f"--service-account-signing-key-file={pk / 'sa.key'}",
        "--service-cluster-ip-range=10.96.0.0/16",
        "--allow-privileged=true",
        f"--cert-dir={pk}", "--profiling=false",
        "--event-ttl=1h", "-v=1",
    ), http_ready(f"{server}/readyz", expect="ok"))  # /readyz is open to anonymous requests


def spec(pki_dir: Path, real_nodes: bool) -> Spec:
    """kube-apiserver on etcd (already up) with the PKI of make_pki in ``pki_dir``; once it is
    ready, the box writes the admin kubeconfig (write_kubeconfig)."""
    return Spec(NAME, ("apiserver",), lambda ports: component(pki_dir, real_nodes, ports))


def write_kubeconfig(path: Path, server: str, pki_dir: Path) -> None:
    """The admin kubeconfig (client certificate in system:masters), mode 0600."""
    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    cfg = {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": "localbox", "cluster": {
            "server": server, "certificate-authority-data": b64(pki_dir / "ca.crt")}}],
        "users": [{"name": "admin", "user": {
            "client-certificate-data": b64(pki_dir / "admin.crt"),
            "client-key-data": b64(pki_dir / "admin.key")}}],
        "contexts": [{"name": "localbox", "context": {"cluster": "localbox", "user": "admin"}}],
        "current-context": "localbox",
    }
    pki._write(path, yaml.safe_dump(cfg).encode(), 0o600)


def crd_files(profile: str) -> list[Path]:
    """The CRD files build-binaries.sh copied; a clear error when the ones `profile` needs are missing."""
    d = paths.crd_dir()
    files = sorted(d.glob("*/*.yaml")) if d.is_dir() else []
    names = {f.name for f in files}
    need = {"scheduling.volcano.sh_podgroups.yaml", "scheduling.volcano.sh_queues.yaml",
            "kubeflow.org_pytorchjobs.yaml"}
    if profile == "full":
        need |= {"topology.volcano.sh_hypernodes.yaml", "nodeinfo.volcano.sh_numatopologies.yaml",
                 "bus.volcano.sh_commands.yaml"}
    if not need <= names:
        raise BoxError(f"CRDs missing in {d}: {', '.join(sorted(need - names))}. "
                       f"Run: bash hack/build-binaries.sh (it copies them from the module cache)")
    return files


def install_crds(box: BoxLike, files: list[Path]) -> None:
    """Apply every CustomResourceDefinition in `files` and wait until all are Established."""
    t = time.monotonic()
    names = []
    for f in files:
        for doc in yaml.safe_load_all(f.read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            doc.get("metadata", {}).pop("creationTimestamp", None)
            doc.pop("status", None)
            names.append(doc["metadata"]["name"])
            box.kube.apply(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{doc['metadata']['name']}",
                           doc)

    def established() -> bool:
        for n in names:
            crd = box.kube.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{n}")
            conds = {c["type"]: c["status"] for c in crd.get("status", {}).get("conditions", [])}
            if conds.get("Established") != "True":
                return False
        return True

    box.kube.wait_for("CRDs Established", established, 60)
    box.say(f"{len(names)} CRDs installed and Established in {time.monotonic() - t:.1f}s")
