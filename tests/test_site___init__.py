"""The site's extension imports no torch unless a page runs (docs/_ext/effpt_site/hooks.py).

Importing torch was a quarter of a no-change rebuild: the extension read expectation
records through effpt.expect, which imported torch, and its hooks imported torch at
import although a build that executes nothing never calls them.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

EXT = Path(__file__).resolve().parents[1] / "docs" / "_ext"


def test_importing_the_extension_and_its_hooks_imports_no_torch(imports_torch):
    code = (
        "import importlib, effpt_site\n"
        "for name in (*effpt_site.MODULES, 'hooks', 'layout', 'outputs'):\n"
        "    importlib.import_module(f'effpt_site.{name}')"
    )
    assert not imports_torch(code)


def test_reading_expectation_records_imports_no_torch(imports_torch):
    assert not imports_torch("from effpt.expect import Expectation, read_expectations")


def test_a_hook_imports_torch_when_a_page_runs(tmp_path, imports_torch):
    code = (
        "from effpt_site import hooks\n"
        f"hooks.reset_state({{'gallery_dirs': 'out', 'src_dir': {str(tmp_path)!r}}}, None)"
    )
    assert imports_torch(code)


@pytest.mark.skipif(sys.platform != "linux", reason="the device files are Linux's")
def test_a_machine_without_a_gpu_driver_says_no_memory_figure_without_torch(imports_torch):
    from effpt_site import hooks

    if any(Path(p).exists() for p in hooks.GPU_DEVICE_FILES):
        pytest.skip("this machine has a GPU driver: torch is asked")
    assert not imports_torch("from effpt_site import hooks\nassert not hooks.memory_is_measured()")


def _through_the_environment(node) -> bool:
    """``env.app``, ``self.env.app``, ``settings.env.app``: the application reached
    through the build environment."""
    if not (isinstance(node, ast.Attribute) and node.attr == "app"):
        return False
    owner = node.value
    return (isinstance(owner, ast.Name) and owner.id == "env") or (
        isinstance(owner, ast.Attribute) and owner.attr == "env"
    )


def test_no_module_reaches_the_application_through_the_environment():
    """Sphinx 9 deprecates ``BuildEnvironment.app`` (RemovedInSphinx11Warning); a directive
    takes what it needs from the environment (its ``config``, ``srcdir``). The tests turn
    the warning into an error where a build runs a directive; this catches a use in one
    that no test builds."""
    found = []
    for path in sorted((EXT / "effpt_site").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        found += [f"{path.name}:{n.lineno}" for n in ast.walk(tree) if _through_the_environment(n)]
    assert found == []
