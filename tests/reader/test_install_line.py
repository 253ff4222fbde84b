"""The reader's environment holds the effpt that a page's install line installs."""

from __future__ import annotations

import subprocess
import urllib.request
import zipfile

from page_runner import ROOT, SCRIPTS

from effpt_site import packages

SITE = ROOT / "docs" / "_build" / "html"


def test_the_line_took_effpt_from_the_site(installed_as_the_line_says, served_site):
    command, log, python = installed_as_the_line_says
    _, base = served_site
    version = command.split()[2].removeprefix("effpt==")
    wheel = f"effpt-{version}-py3-none-any.whl"
    assert f"{base}{packages.FOLDER}/{wheel}" in log, log
    probe = subprocess.run(
        [
            str(python),
            "-c",
            (
                "import effpt, importlib.metadata as m, pathlib; "
                "print(m.version('effpt')); print(pathlib.Path(effpt.__file__).read_text())"
            ),
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    )
    installed_version, init = probe.stdout.split("\n", 1)
    assert installed_version == version
    with zipfile.ZipFile(SITE / packages.FOLDER / wheel) as served:
        assert init.rstrip("\n") == served.read("effpt/__init__.py").decode().rstrip("\n")


def test_every_page_states_the_line_the_environment_was_installed_with(
    installed_as_the_line_says, served_site
):
    command, _, _ = installed_as_the_line_says
    _, base = served_site
    for script in SCRIPTS:
        page = f"auto_examples/{script.parent.name}/{script.stem}.html"
        with urllib.request.urlopen(base + page) as response:
            stated = set(packages.stated_commands(response.read().decode("utf-8")))
        assert stated == {command}, page
    notebook = next((SITE / "_downloads").rglob("plot_fitting_a_curve.ipynb"))
    first = packages.stated_commands(notebook.read_text(encoding="utf-8"), ".ipynb")
    assert first[0] == command.replace(base, packages.SITE)
