"""The import floors of DESIGN §2a hold: pyproject.toml's import-linter contracts are all kept.

`scripts/test` runs the same check (`lint-imports`); this test makes a plain `pytest` catch an
import that crosses a floor too, and that a new module of `agent` or `graph` is given a floor.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import tomllib

from tests.support.runners import ROOT

CHECK = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"


def _layers_contract() -> dict[str, object]:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["type"] == "layers")


def test_every_import_contract_is_kept() -> None:
    """`lint-imports` over the repository's code passes: no import breaks a floor, an independence
    or a privacy rule beyond the exceptions pyproject.toml lists."""
    proc = subprocess.run([sys.executable, "-c", CHECK], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_every_module_of_agent_and_graph_is_on_a_floor() -> None:
    """A new top-level module or package of `agent` or `graph` must be placed in the layers contract:
    a module on no floor would be checked by nothing."""
    layers = _layers_contract()["layers"]
    assert isinstance(layers, list)
    placed = {name.strip() for layer in layers for name in layer.replace("|", ":").split(":")}
    for package in ("agent", "graph"):
        children = {f"{package}.{m.name}" for m in pkgutil.iter_modules([str(ROOT / package)])}
        assert children - placed == set(), f"on no floor of [tool.importlinter]: {sorted(children - placed)}"


def test_every_module_of_the_runner_is_on_one_of_its_floors() -> None:
    """The runner package has floors of its own (the drain above the facade above a turn's parts):
    a new module of `agent.runner` must be placed there too."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    inner = next(c for c in contracts if c.get("containers") == ["agent.runner"])
    placed = {name.strip() for layer in inner["layers"] for name in layer.replace("|", ":").split(":")}
    modules = {m.name for m in pkgutil.iter_modules([str(ROOT / "agent" / "runner")])}
    assert modules, "agent/runner holds no module"
    assert modules - placed == set(), f"on no floor of the runner's contract: {sorted(modules - placed)}"
