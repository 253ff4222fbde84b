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


def _recopied(site):
    """What Sphinx does at every build: the unstamped files copied over the stamped ones."""
    (site / "_downloads" / "a1" / "plot_a.py").write_text(PAGE, encoding="utf-8")
    with zipfile.ZipFile(site / "_downloads" / "z9" / "plot_a.zip", "w") as archive:
        archive.writestr("plot_a.py", PAGE)
        archive.writestr("plot_a.ipynb", "{}")


def _counting(monkeypatch):
    calls = []
    stamp = downloads.stamp_script

    def counted(text, name):
        calls.append(name)
        return stamp(text, name)

    monkeypatch.setattr(downloads, "stamp_script", counted)
    return calls


def test_a_recopied_unchanged_download_is_stamped_from_the_cache(tmp_path, monkeypatch):
    site, cache = _site(tmp_path), tmp_path / "cache"
    downloads.stamp_downloads(site, cache)
    stamped = {p: p.read_bytes() for p in site.rglob("*") if p.is_file()}
    _recopied(site)
    calls = _counting(monkeypatch)
    assert downloads.stamp_downloads(site, cache) == 2
    assert calls == []  # nothing parsed or zipped again
    assert {p: p.read_bytes() for p in site.rglob("*") if p.is_file()} == stamped


def test_a_changed_download_is_stamped_anew(tmp_path, monkeypatch):
    site, cache = _site(tmp_path), tmp_path / "cache"
    downloads.stamp_downloads(site, cache)
    changed = PAGE.replace("2.0", "3.0")
    (site / "_downloads" / "a1" / "plot_a.py").write_text(changed, encoding="utf-8")
    calls = _counting(monkeypatch)
    assert downloads.stamp_downloads(site, cache) == 1
    assert calls == ["plot_a.py"]
    text = (site / "_downloads" / "a1" / "plot_a.py").read_text(encoding="utf-8")
    assert 'print("slope", 3.0)' in text
    assert downloads.run_alone_line("plot_a.py") in text
    # Only what this pass met stays: the new script stamped, and that it and the (still
    # stamped) zip need nothing more; the old script's entries are gone.
    assert len(list(cache.iterdir())) == 3


def test_a_new_install_line_restamps_every_download(tmp_path, monkeypatch):
    site, cache = _site(tmp_path), tmp_path / "cache"
    downloads.stamp_downloads(site, cache)
    _recopied(site)
    monkeypatch.setattr(downloads, "install_command", lambda: "pip install effpt==9.9")
    calls = _counting(monkeypatch)
    downloads.stamp_downloads(site, cache)
    assert calls == ["plot_a.py", "plot_a.py"]
    text = (site / "_downloads" / "a1" / "plot_a.py").read_text(encoding="utf-8")
    assert "``pip install effpt==9.9``" in text
