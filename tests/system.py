"""System commands the tests need, installed from Debian's packages when missing (as root)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def _install(packages: tuple[str, ...]) -> None:
    """apt-get installs `packages` when we are root (else the caller's assertion says how)."""
    if os.geteuid() == 0:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update"], check=True, env=env, capture_output=True)
        subprocess.run(
            ["apt-get", "install", "-y", *packages], check=True, env=env, capture_output=True
        )


def ensure_command(name: str, *packages: str) -> str:
    """The path of `name`; when it is missing and we are root, apt-get installs `packages`."""
    path = shutil.which(name)
    if path is None:
        _install(packages)
        path = shutil.which(name)
    assert path, f"{name} is not installed (apt-get install -y {' '.join(packages)})"
    return path


def ensure_file(path: Path, *packages: str) -> Path:
    """`path`, which `packages` install (as for ensure_command)."""
    if not path.exists():
        _install(packages)
    assert path.exists(), f"{path} is missing (apt-get install -y {' '.join(packages)})"
    return path
