"""The compiled build's switch (hatch_build.py), through hatchling's own wheel builder and
without compiling: off, the wheel is pure and the build asks for nothing more; on, it asks for
mypy and the runtime dependencies, and an editable install is refused. (The compiled wheel
itself is built and tested by the test command's compiled stage, scripts/test_compiled.sh.)"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from hatchling.builders.wheel import WheelBuilder

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(
    not (ROOT / "hatch_build.py").exists(),
    reason="the compiled stage runs the wheel's files, not a source tree to build",
)


def builder(monkeypatch: pytest.MonkeyPatch, switch: str | None) -> WheelBuilder:
    if switch is None:
        monkeypatch.delenv("PUSHSERVER_COMPILE", raising=False)
    else:
        monkeypatch.setenv("PUSHSERVER_COMPILE", switch)
    return WheelBuilder(str(ROOT))


@pytest.mark.parametrize("switch", [None, "", "0"])
def test_without_the_switch_the_wheel_is_pure_python(monkeypatch, tmp_path, switch) -> None:
    wheel = builder(monkeypatch, switch)
    assert wheel.config.dependencies == []
    (path,) = wheel.build(directory=str(tmp_path), versions=["standard"])
    assert Path(path).name == "pushserver-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(path) as whl:
        names = whl.namelist()
        info = whl.read("pushserver-0.1.0.dist-info/WHEEL").decode()
    assert "pushserver/core/hub.py" in names
    assert [name for name in names if name.endswith((".so", ".pyd", ".c"))] == []
    assert "Root-Is-Purelib: true" in info


def test_with_the_switch_the_build_asks_for_mypy_and_refuses_an_editable_install(
    monkeypatch, tmp_path
) -> None:
    wheel = builder(monkeypatch, "1")
    wants = wheel.config.dependencies
    assert "mypy==2.4.1" in wants and any(w.startswith("aiohttp") for w in wants)
    with pytest.raises(RuntimeError, match="an editable install runs the checkout"):
        list(wheel.build(directory=str(tmp_path), versions=["editable"]))
    assert list(tmp_path.iterdir()) == []
