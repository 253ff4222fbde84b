"""The downloadable scripts carry the line that runs them alone (docs/_ext/effpt_site/downloads.py)."""

from __future__ import annotations

import zipfile

import effpt
from effpt_site import downloads, packages

PAGE = '"""\nFit a line\n==========\n\nIntro.\n"""\n\nprint("slope", 2.0)\n'


def _site(tmp_path):
    folder = tmp_path / "site" / downloads.DOWNLOADS
    (folder / "a1").mkdir(parents=True)
    (folder / "a1" / "plot_a.py").write_text(PAGE, encoding="utf-8")
    (folder / "z9").mkdir()
    with zipfile.ZipFile(folder / "z9" / "plot_a.zip", "w") as archive:
        archive.writestr("plot_a.py", PAGE)
        archive.writestr("plot_a.ipynb", "{}")
    return tmp_path / "site"


def test_every_downloaded_script_and_zipped_script_states_the_line(tmp_path):
    site = _site(tmp_path)
    assert downloads.stamp_downloads(site) == 2
    line = downloads.run_alone_line("plot_a.py")
    script = (site / "_downloads" / "a1" / "plot_a.py").read_text(encoding="utf-8")
    assert script.startswith('"""\nFit a line\n==========\n\nIntro.\n\n' + line + '\n"""\n')
    with zipfile.ZipFile(site / "_downloads" / "z9" / "plot_a.zip") as archive:
        assert archive.read("plot_a.py").decode() == script
        assert archive.read("plot_a.ipynb") == b"{}"  # the rest as it was
    # The build's own check reads them as it reads every page: both name this version.
    assert (
        packages.check_install_lines(site, {effpt.__version__}) == 1
    )  # the .py (zips are not read)


def test_a_second_pass_changes_nothing(tmp_path):
    site = _site(tmp_path)
    downloads.stamp_downloads(site)
    before = {p: p.read_bytes() for p in site.rglob("*") if p.is_file()}
    assert downloads.stamp_downloads(site) == 0
    assert {p: p.read_bytes() for p in site.rglob("*") if p.is_file()} == before


def test_the_stamped_script_still_runs(tmp_path):
    site = _site(tmp_path)
    downloads.stamp_downloads(site)
    script = site / "_downloads" / "a1" / "plot_a.py"
    compile(script.read_text(encoding="utf-8"), str(script), "exec")
