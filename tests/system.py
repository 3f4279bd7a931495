"""System commands the tests need, installed from Debian's packages when missing (as root)."""

from __future__ import annotations

import os
import shutil
import subprocess


def ensure_command(name: str, *packages: str) -> str:
    """The path of `name`; when it is missing and we are root, apt-get installs `packages`."""
    path = shutil.which(name)
    if path is None and os.geteuid() == 0:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update"], check=True, env=env, capture_output=True)
        subprocess.run(
            ["apt-get", "install", "-y", *packages], check=True, env=env, capture_output=True
        )
        path = shutil.which(name)
    assert path, f"{name} is not installed (apt-get install -y {' '.join(packages)})"
    return path
