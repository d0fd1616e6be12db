"""deploy/: what can be checked without a Docker engine or a cluster.

The compose file, the Kubernetes manifests and the systemd units are parsed and held to the fields and
the safety settings they need; `kubectl kustomize` and `systemd-analyze verify` run when installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ultron.cli import build_parser
from ultron.config import Settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
K8S = DEPLOY / "k8s"
# Something that looks like a real credential (not a CHANGE_ME placeholder or an empty value).
SECRETISH = re.compile(
    r"(sk-[A-Za-z0-9]{16,}|ult_[A-Za-z0-9]{16,}|AKIA[0-9A-Z]{16}|://[^:/\s]+:(?!CHANGE_ME)[^@${\s]{6,}@)"
)


def _commands() -> set[str]:
    return set(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]


def _manifests() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                doc["__file__"] = path.name
                docs.append(doc)
    return docs


def _pod_specs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc.get("spec", {})
    if doc["kind"] in ("Deployment", "Job"):
        return [spec["template"]["spec"]]
    if doc["kind"] == "CronJob":
        return [spec["jobTemplate"]["spec"]["template"]["spec"]]
    return []


# --- Dockerfile ----------------------------------------------------------------------------------


def test_dockerfile_is_slim_non_root_and_bakes_no_secret():
    text = (DEPLOY / "Dockerfile").read_text()
    stages = re.findall(r"^FROM (\S+)", text, flags=re.M)
    assert stages and all(s.endswith("-slim") for s in stages), stages
    final = text.split("\nFROM ")[-1]
    users = re.findall(r"^USER (\S+)", final, flags=re.M)
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert re.search(r"^ENTRYPOINT \[\"ultron\"\]", final, flags=re.M)
    assert "HEALTHCHECK" in final and "/health" in final
    for line in re.findall(r"^(?:ENV|ARG)\b.*(?:\n\s+.*)*", text, flags=re.M):
        assert not re.search(r"KEY|SECRET|PASSWORD|TOKEN|DATABASE_URL", line, flags=re.I), line
    assert not SECRETISH.search(text)
    # What the build copies must exist (the context is the repository root).
    for src in re.findall(r"^COPY (?!--from)(.+) \S+$", text, flags=re.M):
        for part in src.split():
            assert (DEPLOY.parent / part).exists(), part


# --- docker compose ------------------------------------------------------------------------------


def test_compose_has_pgvector_migration_api_and_worker_with_health_checks():
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"db", "migrate", "api", "worker"} <= set(services)
    assert services["db"]["image"].startswith("pgvector/pgvector:")
    assert "pg_isready" in " ".join(services["db"]["healthcheck"]["test"])
    assert services["migrate"]["command"] == ["db", "upgrade"]
    assert services["migrate"]["depends_on"]["db"]["condition"] == "service_healthy"
    for name in ("api", "worker"):
        svc = services[name]
        assert svc["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert svc["healthcheck"]["test"] and not svc["healthcheck"].get("disable")
        assert svc["command"][0] in _commands()
        assert "ULTRON_DATABASE_URL" in svc["environment"]
        assert svc["build"]["dockerfile"] == "deploy/Dockerfile"
        assert (DEPLOY / svc["build"]["context"] / svc["build"]["dockerfile"]).is_file()
    assert "/ready" in " ".join(services["api"]["healthcheck"]["test"])
    assert services["api"]["command"][0] == "serve" and services["worker"]["command"] == ["worker"]
    # Published on loopback only: the first API key is created before the hub faces a network.
    assert all(p.startswith("127.0.0.1:") for p in services["api"]["ports"])
    # Passwords come from the environment (.env), never from the file.
    text = (DEPLOY / "docker-compose.yml").read_text()
    assert "${POSTGRES_PASSWORD:?" in text and not SECRETISH.search(text)
    assert set(compose["volumes"]) >= {"pgdata"}


@pytest.mark.skipif(not shutil.which("docker-compose"), reason="no docker-compose client installed")
def test_compose_config_parses_with_the_client():
    def config(**extra: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "POSTGRES_PASSWORD"} | extra
        argv = ["docker-compose", "-f", str(DEPLOY / "docker-compose.yml"), "config", "--services"]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)

    done = config(POSTGRES_PASSWORD="test-only")
    assert done.returncode == 0, done.stderr
    assert set(done.stdout.split()) == {"db", "migrate", "api", "worker"}
    # Without a password the file refuses to start rather than run a database with a default one.
    refused = config()
    assert refused.returncode != 0 and "POSTGRES_PASSWORD" in refused.stderr


# --- Kubernetes ----------------------------------------------------------------------------------


def test_manifests_have_the_required_fields():
    docs = _manifests()
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert {
        ("Deployment", "ultron-api"),
        ("Service", "ultron-api"),
        ("Deployment", "ultron-worker"),
        ("CronJob", "ultron-worker-cycle"),
        ("Job", "ultron-migrate"),
        ("Secret", "ultron-secrets"),
    } <= kinds
    for doc in docs:
        assert doc.get("apiVersion") and doc.get("kind") and doc["metadata"].get("name"), doc["__file__"]
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", doc["metadata"]["name"])
        if doc["kind"] == "Deployment":
            selector = doc["spec"]["selector"]["matchLabels"]
            labels = doc["spec"]["template"]["metadata"]["labels"]
            assert selector.items() <= labels.items(), doc["__file__"]


def test_pods_run_non_root_with_probes_resources_and_real_commands():
    commands = _commands()
    names = {(d["kind"], d["metadata"]["name"]) for d in _manifests()}
    for doc in _manifests():
        for pod in _pod_specs(doc):
            assert pod["securityContext"]["runAsNonRoot"] is True
            assert pod["securityContext"]["runAsUser"] != 0
            assert pod.get("automountServiceAccountToken") is False
            if doc["kind"] in ("Job", "CronJob"):
                assert pod["restartPolicy"] in ("OnFailure", "Never")
            mounts = {v["name"] for v in pod.get("volumes", [])}
            for c in pod["containers"]:
                assert c["image"] and c["args"][0] in commands, (doc["__file__"], c["args"])
                assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]
                sc = c["securityContext"]
                assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
                assert sc["capabilities"]["drop"] == ["ALL"]
                assert {m["name"] for m in c.get("volumeMounts", [])} <= mounts
                for source in c.get("envFrom", []):
                    ref = source.get("secretRef") or source.get("configMapRef")
                    kind = "Secret" if "secretRef" in source else "ConfigMap"
                    assert (kind, ref["name"]) in names, ref
    api = next(d for d in _manifests() if d["kind"] == "Deployment" and d["metadata"]["name"] == "ultron-api")
    container = _pod_specs(api)[0]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    port = container["ports"][0]
    service = next(d for d in _manifests() if d["kind"] == "Service")
    assert service["spec"]["ports"][0]["targetPort"] in (port["name"], port["containerPort"])
    assert service["spec"]["selector"].items() <= api["spec"]["template"]["metadata"]["labels"].items()
    worker = next(d for d in _manifests() if d["metadata"]["name"] == "ultron-worker")
    wc = _pod_specs(worker)[0]["containers"][0]
    metrics_port = {e["name"]: e["value"] for e in wc["env"]}["ULTRON_METRICS_PORT"]
    assert "metrics_port" in Settings.model_fields
    assert str(wc["ports"][0]["containerPort"]) == metrics_port
    assert worker["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == metrics_port
    cron = next(d for d in _manifests() if d["kind"] == "CronJob")
    assert _pod_specs(cron)[0]["containers"][0]["args"] == ["worker", "--once"]
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    job = next(d for d in _manifests() if d["kind"] == "Job")
    assert _pod_specs(job)[0]["containers"][0]["args"] == ["db", "upgrade"]


def test_secret_holds_placeholders_only():
    secret = next(d for d in _manifests() if d["kind"] == "Secret")
    for key, value in secret["stringData"].items():
        assert value == "" or "CHANGE_ME" in value, key
    for path in K8S.glob("*.yaml"):
        assert not SECRETISH.search(path.read_text()), path.name


def test_kustomization_lists_existing_files():
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    for resource in kustomization["resources"]:
        assert (K8S / resource).is_file(), resource


@pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl not installed")
def test_kubectl_kustomize_builds_the_manifests():
    done = subprocess.run(["kubectl", "kustomize", str(K8S)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    built = [d for d in yaml.safe_load_all(done.stdout) if d]
    assert all(d["metadata"].get("namespace") == "ultron" for d in built if d["kind"] != "Namespace")
    images = {c["image"] for d in built for pod in _pod_specs(d) for c in pod["containers"]}
    assert images == {"ghcr.io/example/ultron:0.1.0"}


# --- systemd -------------------------------------------------------------------------------------


def _unit(path: Path) -> dict[str, dict[str, list[str]]]:
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        assert current is not None, path.name
        current.setdefault(key, []).append(value)
    return sections


def test_systemd_units_run_as_a_hardened_unprivileged_user():
    units = {p.name: _unit(p) for p in (DEPLOY / "systemd").glob("ultron-*.service")}
    assert {"ultron-api.service", "ultron-worker@.service", "ultron-migrate.service"} <= set(units)
    commands = _commands()
    for name, unit in units.items():
        service = unit["Service"]
        assert service["User"] == ["ultron"] and service["EnvironmentFile"], name
        assert service["NoNewPrivileges"] == ["yes"] and service["ProtectSystem"] == ["strict"], name
        for command in service["ExecStart"]:
            match = re.search(r"/bin/ultron (\w+)", command)
            assert match and match.group(1) in commands, (name, command)
    for name in ("ultron-api.service", "ultron-worker@.service"):
        assert units[name]["Service"]["Restart"] == ["on-failure"]
        assert "ultron-migrate.service" in units[name]["Unit"]["After"][0]
    assert units["ultron-migrate.service"]["Service"]["Type"] == ["oneshot"]


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed")
def test_systemd_analyze_verifies_the_units(tmp_path):
    ultron = Path(sys.executable).with_name("ultron")
    if not ultron.exists():
        pytest.skip("the ultron console script is not installed next to this interpreter")
    for path in (DEPLOY / "systemd").glob("ultron-*"):
        (tmp_path / path.name).write_text(
            path.read_text().replace("/opt/ultron/venv/bin/ultron", str(ultron))
        )
    units = sorted(str(p) for p in tmp_path.iterdir())
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *units], capture_output=True, text=True, timeout=60
    )
    problems = [line for line in done.stderr.splitlines() if "ultron" in line]
    assert done.returncode == 0 and not problems, done.stderr
