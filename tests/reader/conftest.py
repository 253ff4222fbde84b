"""Before any page runs: install effpt exactly as a page's line says, from the built site.

``nox -s reader`` made an environment with effpt's dependencies (and a wheel of this
checkout). This fixture serves the built site (docs/_build/html, from ``nox -s docs``)
on a local port as GitHub Pages serves it, which also rewrites the site's public
address to the local one in every page, reads a gallery page's install line from that
server, removes effpt from the environment and runs the line as it stands. Every page
then runs against the effpt the line installed.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import urllib.request
from pathlib import Path

import pytest
from chromium import serve
from page_runner import ROOT

from effpt_site import packages

SITE = ROOT / "docs" / "_build" / "html"
#: The page whose line the reader's environment is installed with (every page states
#: the same line; test_install_line.py checks that).
FIRST_PAGE = "auto_examples/basics/plot_fitting_a_curve.html"


@pytest.fixture(scope="session")
def served_site():
    """The built site on a local server, as GitHub Pages serves it: (server, base URL)."""
    if not (SITE / packages.FOLDER).is_dir():
        pytest.exit(f"{SITE / packages.FOLDER} is missing: run `nox -s docs` first", returncode=2)
    server, base = serve(SITE, as_github_pages=True)
    yield server, base
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session", autouse=True)
def installed_as_the_line_says(served_site):
    """The install line of a page, fetched from the server, run as it stands."""
    _, base = served_site
    with urllib.request.urlopen(base + FIRST_PAGE) as response:
        (command,) = set(packages.stated_commands(response.read().decode("utf-8")))
    python = os.environ["EFFPT_READER_PYTHON"]
    subprocess.run([python, "-m", "pip", "uninstall", "--yes", "--quiet", "effpt"], check=True)
    argv = shlex.split(command)
    assert argv[0] == "pip", command
    # The constraints keep the dependencies at the versions already installed (nothing
    # is downloaded but effpt); no cache, so effpt comes from the server.
    env = {
        **os.environ,
        "PIP_CONSTRAINT": str(ROOT / "constraints.txt"),
        "PIP_NO_CACHE_DIR": "1",
    }
    result = subprocess.run(
        [python, "-m", *argv], capture_output=True, text=True, env=env, check=False, cwd="/"
    )
    if result.returncode != 0:
        pytest.exit(f"`{command}` failed:\n{result.stdout}\n{result.stderr}", returncode=3)
    return command, result.stdout + result.stderr, Path(python)
