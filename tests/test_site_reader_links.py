"""What a reader can do from a page: report a problem, open a gallery page in Colab
(docs/_ext/effpt_site/reader_links.py).

The Colab links point at the notebooks branch that the Pages workflow publishes; nothing
here can reach Colab or GitHub, so these tests check the links' form and that every
link's target is among what the workflow publishes.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from minisite import family_of_one, stub_app

import effpt
from effpt.machine import Machine
from effpt_site import reader_links
from effpt_site.i18n import translate
from effpt_site.layout import example_pages

H100 = Machine("cuda", "NVIDIA H100 80GB HBM3", None, "13.0", "2.13.0")

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
WORKFLOW = ROOT / ".github" / "workflows" / "pages.yml"


# `conf` and `site_app`: tests/conftest.py.


# -- Report a problem ------------------------------------------------------------------


def test_report_link_is_a_new_issue_prefilled_and_encoded():
    url = reader_links.issue_url(
        "https://github.com/effpt/effpt",
        page="https://effpt.github.io/effpt/zh_CN/auto_examples/basics/plot_modules.html",
        title="Modules & parameters: 100% #1?",
        machine="x86_64 CPU (Intel Xeon), 2 threads · torch 2.13.0",
        language="zh_CN",
        effpt_version="0.2.0",
        torch_version="2.13.0+cpu",
    )
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == (
        "https",
        "github.com",
        "/effpt/effpt/issues/new",
    )
    # Everything a URL treats specially is percent-encoded; spaces are %20, never '+'.
    assert " " not in url
    assert "+" not in parts.query
    assert "#" not in url
    assert "&" not in parts.query.replace("&body=", "")
    fields = parse_qs(parts.query, strict_parsing=True)
    assert fields["title"] == ['Problem on "Modules & parameters: 100% #1?"']
    body = fields["body"][0].splitlines()
    assert body[:4] == [
        "Page: https://effpt.github.io/effpt/zh_CN/auto_examples/basics/plot_modules.html",
        "effpt: 0.2.0",
        "torch: 2.13.0+cpu",
        "Machine of the build: x86_64 CPU (Intel Xeon), 2 threads · torch 2.13.0",
    ]
    # The prompt is in the reader's language.
    assert body[-1] == translate("zh_CN", "What went wrong, and what did you expect?")
    assert body[-1] != "What went wrong, and what did you expect?"


def test_report_link_defaults_to_this_effpt_and_torch():
    import torch

    url = reader_links.issue_url("https://github.com/effpt/effpt", page="p", title="t", machine="m")
    body = parse_qs(urlsplit(url).query)["body"][0]
    assert f"effpt: {effpt.__version__}\n" in body
    assert f"torch: {torch.__version__}\n" in body


def test_a_gallery_page_reports_the_machine_of_its_stamp(tmp_path):
    family_of_one(tmp_path)
    records = tmp_path / "docs" / "auto" / "_records"
    records.mkdir(parents=True)
    (records / "plot_a.stamp.json").write_text(
        json.dumps({"executed_at": "2026-11-24 20:00 UTC", "machine": H100.to_dict()}),
        encoding="utf-8",
    )
    app = stub_app(tmp_path)
    app.doctreedir = str(tmp_path / "doctrees")
    assert reader_links.page_machine(app, "auto/fam/plot_a") == str(H100)
    # Any other page names the machine that built the site.
    from effpt.device import describe

    assert reader_links.page_machine(app, "index") == describe()
    # A stamp whose machine lacks a field fails naming the stamp.
    stamp = records / "plot_a.stamp.json"
    stamp.write_text(json.dumps({"executed_at": "x", "machine": {"kind": "cuda"}}))
    with pytest.raises(ValueError, match=rf"{stamp}: field 'machine': machine: missing fields"):
        reader_links.page_machine(app, "auto/fam/plot_a")


@pytest.mark.parametrize(
    "bad", ["https://gitlab.com/a/b", "https://github.com/a", "github.com/a/b"]
)
def test_a_repository_that_is_not_on_github_fails_naming_the_setting(bad):
    with pytest.raises(ValueError, match="effpt_repository"):
        reader_links.repository_path(bad)


def test_the_new_strings_are_translated():
    for text in (
        "Report a problem with this page",
        "What went wrong, and what did you expect?",
        "Run in Google Colab",
    ):
        assert translate("zh_CN", text) != text, text


# -- Open in Colab ---------------------------------------------------------------------


def _publish_steps():
    """The workflow's upload of the notebooks and the job that pushes them to a branch."""
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    jobs = workflow["jobs"]
    (upload,) = [
        step
        for step in jobs["build"]["steps"]
        if step.get("uses", "").startswith("actions/upload-artifact@")
        and step["with"]["name"] == "notebooks"
    ]
    (publisher,) = [
        job
        for job in jobs.values()
        if any(
            step.get("uses", "").startswith("actions/download-artifact@")
            and step["with"]["name"] == "notebooks"
            for step in job["steps"]
        )
    ]
    return upload, publisher


def _published_path(pattern: str, path: str) -> str | None:
    """Where upload-artifact puts ``path`` matched by ``pattern``: below the first wildcard."""
    # A glob's wildcards stay within one folder, as in upload-artifact.
    parts = PurePosixPath(pattern).parts
    if len(PurePosixPath(path).parts) != len(parts) or not PurePosixPath(path).match(pattern):
        return None
    fixed = next(i for i, part in enumerate(parts) if any(c in part for c in "*?["))
    root = PurePosixPath(*parts[:fixed])
    return str(PurePosixPath(path).relative_to(root))


def test_colab_link_has_colabs_github_form():
    url = reader_links.colab_url(
        "https://github.com/effpt/effpt", "notebooks", "basics/plot_modules.ipynb"
    )
    assert url == (
        "https://colab.research.google.com/github/effpt/effpt/blob/notebooks/"
        "basics/plot_modules.ipynb"
    )


def test_every_gallery_notebook_is_published_where_its_colab_link_points(conf, site_app):
    upload, publisher = _publish_steps()
    pattern = upload["with"]["path"]
    assert upload["with"].get("if-no-files-found") == "error"
    gallery = conf["sphinx_gallery_conf"]["gallery_dirs"]
    pages = example_pages(site_app)
    assert pages, "no gallery page found"
    # The notebooks sphinx-gallery writes: beside each generated page.
    generated = {doc: f"docs/{doc}.ipynb" for doc in pages.values()}
    built = sorted(p.relative_to(ROOT).as_posix() for p in (DOCS / gallery).glob("*/*.ipynb"))
    for path in built:
        assert path in generated.values() or "/plot_" not in path, path
    for doc, path in generated.items():
        published = _published_path(pattern, path)
        assert published is not None, f"{path} is not matched by the workflow's {pattern!r}"
        assert published == reader_links.notebook_path(doc, gallery)
        url = reader_links.colab_url(
            conf["effpt_repository"], conf["effpt_notebooks_branch"], published
        )
        assert url.endswith(f"/blob/{conf['effpt_notebooks_branch']}/{published}")
    # The job pushes the downloaded folder, as it is, to the branch the links name.
    (download,) = [s for s in publisher["steps"] if s.get("uses", "").startswith("actions/")]
    (push,) = [s for s in publisher["steps"] if "git push" in s.get("run", "")]
    assert push["working-directory"] == download["with"]["path"]
    assert push["env"]["BRANCH"] == conf["effpt_notebooks_branch"]
    assert 'refs/heads/$BRANCH"' in push["run"]
    assert "github.com/${GITHUB_REPOSITORY}.git" in push["run"]
    assert conf["effpt_repository"] == conf["REPOSITORY"]


def test_only_the_publishing_job_may_write_and_only_contents():
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert workflow["permissions"] == {"contents": "read"}
    _, publisher = _publish_steps()
    assert publisher["permissions"] == {"contents": "write"}
    assert "permissions" not in workflow["jobs"]["build"]


def test_the_notebooks_first_cell_installs_effpt_and_keeps_colabs_torch(conf):
    first = conf["sphinx_gallery_conf"]["first_notebook_cell"].splitlines()
    installs = [line for line in first if "pip install" in line]
    # %pip (not !pip) installs into the kernel's own environment; one package, pinned,
    # from the site's own packages/ folder, and no torch named: pip keeps an installed
    # torch that satisfies effpt's torch>=2.6.
    assert installs == [
        f"%pip install effpt=={effpt.__version__} --find-links {conf['html_baseurl']}packages/"
    ]
    assert not any("torch" in line and "install" in line for line in first)
    assert not any("--upgrade" in line or "-U " in line for line in first)
