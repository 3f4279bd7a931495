"""The Java client's JUnit suite (clients/java), run by Maven against servers it starts itself."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

JAVA_DIR = Path(__file__).resolve().parents[3] / "clients" / "java"
MAVEN = shutil.which("mvn")
OUTPUT_TAIL = 20_000


@pytest.mark.skipif(MAVEN is None or shutil.which("java") is None, reason="needs Maven and a JDK")
@pytest.mark.timeout(900)
def test_java_client_suite() -> None:
    """Fails with Maven's own output, so a broken Java test reads like one."""
    env = dict(os.environ, PUSHSERVER_PYTHON=sys.executable)
    result = subprocess.run(
        [MAVEN, "-q", "-B", "test"],
        cwd=JAVA_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=840,
    )
    if result.returncode != 0:
        output = (result.stdout + result.stderr)[-OUTPUT_TAIL:]
        pytest.fail(f"mvn test exited with {result.returncode}:\n{output}", pytrace=False)
