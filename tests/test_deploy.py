"""The files people deploy with, checked as far as this machine allows: the systemd unit by
`systemd-analyze verify` (its ExecStart pointed at a program that exists here), the compose file
by `docker compose config`, and what each must say (a dedicated user, ProtectSystem=strict, the data
folder writable, restart on failure; PostgreSQL, the migration before the instances; a non-root
image with bubblewrap)."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
UNIT = ROOT / "deploy" / "chatgate.service"
COMPOSE = ROOT / "docker-compose.yml"


def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text())
    return parser


def test_the_unit_runs_as_its_own_user_read_only_but_its_data_folder() -> None:
    service = unit()["Service"]
    assert service["User"] == "chatgate" and service["ProtectSystem"] == "strict"
    assert service["StateDirectory"] == "chatgate" and service["WorkingDirectory"] == "/var/lib/chatgate"
    assert service["Restart"] == "on-failure" and service["RestartPreventExitStatus"] == "2"
    assert service["ExecStart"].endswith("chatgate run -c /etc/chatgate/config.yaml")
    assert "RestrictNamespaces" not in service  # bubblewrap needs user namespaces


def test_systemd_analyze_verifies_the_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze not found: the unit is not verified on this machine")
    here = tmp_path / "chatgate.service"  # the same unit, with a program that exists here
    here.write_text(UNIT.read_text().replace("/opt/chatgate/bin/chatgate", sys.executable))
    done = subprocess.run([analyze, "verify", str(here)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr


def test_the_compose_file_runs_instances_on_postgresql_after_the_migration() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert services["db"]["image"].startswith("postgres:")
    assert services["migrate"]["depends_on"] == {"db": {"condition": "service_healthy"}}
    assert services["chatgate"]["depends_on"] == {"migrate": {"condition": "service_completed_successfully"}}
    assert "CHATGATE_DATABASE_URL" in services["chatgate"]["environment"]
    assert "workspaces:/srv/chatgate/workspaces" in services["chatgate"]["volumes"]


def test_docker_compose_accepts_the_file(tmp_path: Path) -> None:
    docker = shutil.which("docker")
    works = docker is not None and subprocess.run([docker, "compose", "version"], capture_output=True,
                                                  timeout=30, check=False).returncode == 0
    if not works:
        pytest.skip("docker compose not available: the compose file is not checked by it on this machine")
    (tmp_path / ".env").write_text("POSTGRES_PASSWORD=x\n")
    (tmp_path / "config.yaml").write_text("{}\n")
    done = subprocess.run([str(docker), "compose", "-f", str(COMPOSE), "--project-directory", str(tmp_path),
                           "config", "-q"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def test_the_image_runs_as_a_user_with_bubblewrap() -> None:
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text().splitlines()]
    assert "USER chatgate" in lines
    assert any("bubblewrap" in line and "apt-get install" in line for line in lines)


def test_the_image_checks_ops_healthz_on_its_default_bind() -> None:
    from bot.ops.config import DEFAULT_OPS_BIND

    text = (ROOT / "Dockerfile").read_text()
    checks = [line for line in text.splitlines() if line.startswith("HEALTHCHECK")]
    assert len(checks) == 1, checks  # one check, not a placeholder beside it
    assert f"http://{DEFAULT_OPS_BIND}/healthz" in text
    assert text.index("USER chatgate") < text.index("HEALTHCHECK")  # run as the bot's user
