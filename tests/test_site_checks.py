"""The site's build checks (docs/_ext/effpt_site) fail loudly and name what is wrong."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from minisite import family_of_one, stub_app
from sphinx.errors import ExtensionError

from effpt import claims
from effpt.machine import Machine
from effpt.records import Record
from effpt_site import measurements, page_checks

CPU = Machine("cpu", "x86_64 CPU", 2, None, "2.13.0")
H100 = Machine("cuda", "NVIDIA H100 80GB HBM3", None, "12.8", "2.13.0")

GOOD = {
    "task": "t",
    "variant": "v",
    "median_s": 0.001,
    "iqr_s": 0.0001,
    "q1_s": 0.00095,
    "q3_s": 0.00105,
    "repeats": 3,
    "number": 10,
    "baseline": "v",
    "machine": CPU.to_dict(),
}


@pytest.fixture
def app(tmp_path):
    family_of_one(tmp_path)
    (tmp_path / "docs" / "auto" / "_records").mkdir(parents=True)
    return stub_app(tmp_path)


def test_page_stem_names_a_gallery_pages_example_and_nothing_else(app):
    from effpt_site.layout import page_stem

    assert page_stem(app, "auto/fam/plot_a") == "plot_a"
    assert page_stem(app, "index") is None
    assert page_stem(app, "auto/other/plot_a") is None  # a family the site does not list


def write_records(app, stem, lines):
    path = Path(app.srcdir) / "auto" / "_records" / f"{stem}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_valid_records_load_with_their_page(app):
    write_records(app, "plot_a", [json.dumps(GOOD)])
    (row,) = measurements.load_records(app)
    assert row.page == "plot_a"
    assert row.docname == "auto/fam/plot_a"


@pytest.mark.parametrize(
    "line",
    [
        "{not json",
        json.dumps({k: v for k, v in GOOD.items() if k != "median_s"}),
        json.dumps({**GOOD, "median_s": "fast"}),
        json.dumps({**GOOD, "median_s": -1.0}),
        json.dumps({**GOOD, "machine": {**CPU.to_dict(), "threads": None}}),
        json.dumps({**GOOD, "machine": "a fast box"}),
    ],
)
def test_malformed_record_fails_naming_the_file(app, line):
    path = write_records(app, "plot_a", [json.dumps(GOOD), line])
    with pytest.raises(ExtensionError, match=rf"malformed measurement record {path}:2"):
        measurements.load_records(app)


def test_record_from_an_unknown_page_fails(app):
    path = write_records(app, "plot_gone", [json.dumps(GOOD)])
    with pytest.raises(ExtensionError, match=rf"{path} comes from an unknown page 'plot_gone'"):
        measurements.load_records(app)


def _page(tmp_path, docstring_tail, body):
    page = tmp_path / "plot_x.py"
    page.write_text(f'"""\nT\n=\n\nIntro.\n\n{docstring_tail}\n"""\n\n{body}')
    return page


SUMMARY = "\n# %%\n# Summary\n# -------\n# - done\n"


def test_page_without_closing_summary_fails(tmp_path):
    page = _page(tmp_path, "", "# %%\n# Details\nx = 1\n")
    with pytest.raises(
        ExtensionError, match=r"plot_x\.py: the last cell must be a closing summary"
    ):
        page_checks.check_example_source(page)
    page.write_text(page.read_text() + SUMMARY)
    page_checks.check_example_source(page)  # no error


def test_a_page_that_states_its_own_install_line_fails(tmp_path):
    # The box states the line for the version the site serves; a page's own goes stale.
    page_checks.check_example_source(_page(tmp_path, "", "x = 1\n" + SUMMARY))  # no error
    stale = "To run this page on its own: ``pip install effpt==0.0.1``, then\n``python plot_x.py``."
    page = _page(tmp_path, stale, "x = 1\n" + SUMMARY)
    with pytest.raises(
        ExtensionError,
        match=r"plot_x\.py: the page states an install line of its own \(``pip install effpt==0\.0\.1``\)",
    ):
        page_checks.check_example_source(page)
    unpinned = "Install it: ``pip install --upgrade effpt``."
    with pytest.raises(ExtensionError, match="states an install line of its own"):
        page_checks.check_example_source(_page(tmp_path, unpinned, "x = 1\n" + SUMMARY))


def test_example_that_raised_is_reported_as_raised(tmp_path):
    script = tmp_path / "plot_x.py"
    script.write_text("raise ValueError('boom')\n")
    conf = {"failing_examples": {str(script): "Traceback...\nValueError: boom\n"}}
    app = SimpleNamespace(config=SimpleNamespace(sphinx_gallery_conf=conf))
    with pytest.raises(
        ExtensionError, match=r"auto/fam/plot_x: the example raised: ValueError: boom"
    ):
        page_checks.check_not_failed(app, script, "auto/fam/plot_x")


def test_figure_that_did_not_render_fails(tmp_path):
    broken = tmp_path / "sphx_glr_plot_x_001.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    with pytest.raises(ExtensionError, match=r"auto/fam/plot_x: figure sphx_glr_plot_x_001\.png"):
        page_checks.check_image(broken, "auto/fam/plot_x")


def _run_app(app, plot_gallery="True", pattern="/plot_", not_executed=None):
    app.config.plot_gallery = plot_gallery
    app.config.effpt_not_executed = not_executed or {}
    app.config.sphinx_gallery_conf["filename_pattern"] = pattern
    return app


STAMP = {"executed_at": "2026-11-25 04:00 UTC", "machine": "cpu"}


def test_an_executed_page_keeps_its_stamp(app):
    reason = page_checks.not_executed_reason(_run_app(app), "auto/fam/plot_a", "plot_a", 1.5, STAMP)
    assert reason is None


def test_zero_time_without_a_reason_fails(app):
    with pytest.raises(ExtensionError, match=r"auto/fam/plot_a: the example reports zero"):
        page_checks.not_executed_reason(_run_app(app), "auto/fam/plot_a", "plot_a", 0.0, None)
    listed = _run_app(app, not_executed={"plot_a": "needs a GPU"})
    assert page_checks.not_executed_reason(listed, "auto/fam/plot_a", "plot_a", 0.0, None) == (
        "needs a GPU"
    )


def test_an_executed_page_without_the_sites_hook_fails(app):
    with pytest.raises(ExtensionError, match=r"without the site's gallery hook \(no plot_a\.stamp"):
        page_checks.not_executed_reason(_run_app(app), "auto/fam/plot_a", "plot_a", 1.5, None)


def test_pages_a_restricted_or_no_exec_build_did_not_run_say_why(app):
    restricted = _run_app(app, pattern="/plot_.*other")
    reason = page_checks.not_executed_reason(restricted, "auto/fam/plot_a", "plot_a", 0.0, None)
    assert reason == "this build executed only examples matching '/plot_.*other'"
    no_exec = _run_app(app, plot_gallery="0")
    reason = page_checks.not_executed_reason(no_exec, "auto/fam/plot_a", "plot_a", 0.0, None)
    assert reason == "this build executed no examples (--no-exec)"
    # A --no-exec build shows the page's last execution: its stamp stands.
    assert page_checks.not_executed_reason(no_exec, "auto/fam/plot_a", "plot_a", 2.0, STAMP) is None


def test_quartiles_out_of_order_fail(app):
    path = write_records(app, "plot_a", [json.dumps({**GOOD, "q1_s": 0.002})])
    with pytest.raises(ExtensionError, match=rf"{path}:1: .*quartiles out of order"):
        measurements.load_records(app)


def test_compat_matrix_sorts_versions_and_diffs_only_real_changes(tmp_path):
    from effpt_site import compat

    folder = tmp_path / "compat"
    folder.mkdir()
    outputs = {
        "2.6.0": "loss 0.25\nstep 2.00 ms, 4.0× (3.8–4.2) faster\n",
        "2.13.0": "loss 0.25\nstep 3.10 ms, 2.9× (2.5–3.0) faster\n",
        "2.15.0": "loss 0.26\nstep 1.90 ms, 4.1× (4.0–4.2) faster\n",
    }
    for version, output in outputs.items():
        run = {
            "torch": version,
            "machine": CPU.to_dict(),
            "pages": {"plot_a": {"ok": True, "output": output}},
        }
        (folder / f"torch-{version}.json").write_text(json.dumps(run))
    runs = compat.load_matrix(tmp_path)
    assert [r["torch"] for r in runs] == ["2.6.0", "2.13.0", "2.15.0"]
    assert {r["machine"] for r in runs} == {CPU}
    assert compat._diff(runs[0], runs[1], "plot_a") == ""  # only timings changed
    assert "-loss 0.25\n+loss 0.26" in compat._diff(runs[1], runs[2], "plot_a")


def test_compat_diffs_ignore_which_machine_ran_each_version():
    from effpt_site import compat

    xeon = Machine("cpu", "x86_64 CPU (Intel(R) Xeon(R) Processor)", 2, None, "2.13.0")
    epyc = Machine("cpu", "x86_64 CPU (AMD EPYC)", 2, None, "2.15.0")
    runs = [
        {"torch": m.torch, "machine": m, "pages": {"plot_a": {"output": f"{m}\nloss 0.25\n"}}}
        for m in (xeon, epyc)
    ]
    assert compat._diff(runs[0], runs[1], "plot_a") == ""


def _write_expectations(app, stem, lines):
    folder = Path(app.srcdir) / "auto" / "_expectations"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _expectation(verdict_ratio, **kwargs):
    from effpt.expect import expect

    return expect("x beats y", verdict_ratio, device="cpu", show=False, **kwargs).to_dict()


def test_expectations_load_with_their_page_in_reading_order(app):
    from effpt_site import expectations

    _write_expectations(app, "plot_a", [json.dumps(_expectation(2.0, above=1.0))])
    (row,) = expectations.load_expectations(app)
    assert (row.page, row.docname, row.expectation.verdict) == (
        "plot_a",
        "auto/fam/plot_a",
        "holds here",
    )


def test_expectations_of_an_unknown_page_fail_the_build(app):
    from effpt_site import expectations

    _write_expectations(app, "plot_gone", [json.dumps(_expectation(2.0, above=1.0))])
    with pytest.raises(ExtensionError, match="unknown page 'plot_gone'"):
        expectations.load_expectations(app)


def test_a_malformed_expectation_fails_the_build_naming_file_and_line(app):
    from effpt_site import expectations

    path = _write_expectations(app, "plot_a", ['{"statement": "x"}'])
    with pytest.raises(ExtensionError, match=rf"{path}:1: missing fields"):
        expectations.load_expectations(app)


def test_the_build_log_ends_with_what_did_not_hold_and_never_fails(app, caplog):
    from effpt_site import expectations

    lines = [_expectation(2.0, above=1.0), _expectation(0.5, above=1.0)]
    _write_expectations(app, "plot_a", [json.dumps(e) for e in lines])
    app.builder = SimpleNamespace(name="html")
    app.config.language = "en"
    with caplog.at_level("INFO"):
        expectations.report(app, None)
    text = caplog.text
    assert "2 expectations: 1 hold here, 1 do not, 0 inconclusive" in text
    assert "did not hold: plot_a: x beats y (expected above 1×, measured 0.5×)" in text


def test_outputs_loads_alone_as_the_archive_does_and_reads_every_stamp(tmp_path):
    """docs/_tools/archive.py loads outputs.py without the package (which imports Sphinx)."""
    import importlib.util

    path = Path(page_checks.__file__).with_name("outputs.py")
    spec = importlib.util.spec_from_file_location("effpt_site_outputs_alone", path)
    alone = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(alone)
    conf = {"src_dir": tmp_path, "gallery_dirs": "auto"}
    alone.write_stamp(conf, "plot_b", {"executed_at": "2026-11-25 05:00 UTC", "machine": "cpu"})
    alone.write_stamp(conf, "plot_a", {"executed_at": "2026-11-25 04:00 UTC", "machine": "gpu"})
    stamps = alone.stamps(conf)
    assert list(stamps) == ["plot_a", "plot_b"]
    assert stamps["plot_a"]["machine"] == "gpu"
    (tmp_path / "auto" / "fam").mkdir()
    (tmp_path / "auto" / "fam" / "plot_a.cost.json").write_text('{"time": 3.5, "memory": 0}')
    assert alone.read_cost(tmp_path, "auto/fam/plot_a").seconds == 3.5


def test_a_cuda_record_loads_with_its_machine_fields(app):
    write_records(app, "plot_a", [json.dumps({**GOOD, "machine": H100.to_dict()})])
    (row,) = measurements.load_records(app)
    assert row.machine == H100


def test_a_record_written_before_machines_had_fields_still_loads(app):
    line = "x86_64 CPU (AMD EPYC), 2 threads · torch 2.13.0"
    write_records(app, "plot_a", [json.dumps({**GOOD, "machine": line})])
    (row,) = measurements.load_records(app)
    assert (row.machine.kind, row.machine.threads, str(row.machine)) == ("cpu", 2, line)


def _write_run(folder, version, machine):
    run = {"torch": version, "machine": machine, "pages": {"plot_a": {"ok": True, "output": ""}}}
    (folder / f"torch-{version}.json").write_text(json.dumps(run))


def test_an_old_compat_file_loads_and_a_gpu_run_is_told_by_its_fields(tmp_path):
    from effpt_site import compat

    folder = tmp_path / "compat"
    folder.mkdir()
    _write_run(folder, "2.6.0", "x86_64 CPU (Intel(R) Xeon(R) Processor), 2 threads · torch 2.6.0")
    _write_run(folder, "2.13.0", H100.to_dict())
    old, new = compat.load_matrix(tmp_path)
    assert old["machine"] == Machine(
        "cpu", "x86_64 CPU (Intel(R) Xeon(R) Processor)", 2, None, "2.6.0"
    )
    assert new["machine"] == H100
    assert compat.badge_text([old], "plot_a") == "Verified on a CPU with torch 2.6.0"
    assert (
        compat.badge_text([old, new], "plot_a") == "Verified on a GPU with torch 2.6.0 and 2.13.0"
    )


@pytest.mark.parametrize(
    ("machine", "error"),
    [
        ({**CPU.to_dict(), "threads": 0}, "'threads' must be a positive int"),
        ({**H100.to_dict(), "cuda": None}, "'cuda' must be a non-empty str"),
        ("NVIDIA H100 (CUDA 12.8)", "is not one that effpt.device.describe"),
    ],
)
def test_a_malformed_machine_in_a_compat_file_names_the_file(tmp_path, machine, error):
    from effpt_site import compat

    folder = tmp_path / "compat"
    folder.mkdir()
    _write_run(folder, "2.6.0", machine)
    path = folder / "torch-2.6.0.json"
    with pytest.raises(ValueError, match=rf"{path}: field 'machine': .*{error}"):
        compat.load_matrix(tmp_path)


def test_a_compat_file_without_a_machine_names_the_file(tmp_path):
    from effpt_site import compat

    folder = tmp_path / "compat"
    folder.mkdir()
    (folder / "torch-2.6.0.json").write_text(json.dumps({"torch": "2.6.0", "pages": {}}))
    with pytest.raises(ValueError, match=rf"{folder / 'torch-2.6.0.json'}: no 'machine' field"):
        compat.load_matrix(tmp_path)


# The claims table: each claim with the outcome its own page recorded (effpt.claims).


def _fake_claims(monkeypatch, device="cpu"):
    fake = (claims.Claim("fake", "x is twice as fast", "a source", device, "plot_a", 2.0),)
    monkeypatch.setattr(claims, "CLAIMS", fake)
    monkeypatch.setattr(measurements, "CLAIMS", fake)
    return fake[0]


def _records(machine=CPU, fast_s=0.4):
    def one(variant, median):
        data = {**GOOD, "variant": variant, "baseline": "slow", "machine": machine.to_dict()}
        data |= {"median_s": median, "q1_s": median * 0.99, "q3_s": median * 1.01}
        data["per_call_s"] = [median * f for f in (0.98, 0.99, 1.0, 1.01, 1.02)]  # issue 34
        data["repeats"] = 5
        return Record.from_dict(data)

    return one("slow", 1.0), one("fast", fast_s)


def _check_on_page(app, monkeypatch, stem, *outcomes):
    """Check outcomes as page ``stem`` would in the build: into its claims file."""
    folder = Path(app.srcdir) / "auto" / "_claims"
    folder.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv(claims.CLAIMS_ENV, str(folder / f"{stem}.jsonl"))
    for c, slow, fast in outcomes:
        c.check(slow, fast, show=False)
    return folder / f"{stem}.jsonl"


def test_the_claims_table_shows_what_the_page_recorded(app, monkeypatch):
    c = _fake_claims(monkeypatch)
    _check_on_page(app, monkeypatch, "plot_a", (c, *_records()))
    text = "\n".join(measurements.claim_lines(app))
    assert "x is twice as fast" in text
    assert (
        "2.5× (2.4–2.6) on x86_64 CPU, 2 threads · torch 2.13.0 (:doc:`/auto/fam/plot_a`, t)"
        in text
    )
    assert text.rstrip().endswith("- yes")


def test_a_claim_whose_page_ran_without_checking_it_fails_the_build(app, monkeypatch):
    _fake_claims(monkeypatch)
    write_records(app, "plot_a", [json.dumps(GOOD)])
    with pytest.raises(ExtensionError, match="claim 'fake': plot_a ran but did not check it"):
        measurements.claim_lines(app)


def test_a_claim_whose_page_did_not_run_is_not_measured(app, monkeypatch):
    _fake_claims(monkeypatch)
    text = "\n".join(measurements.claim_lines(app))
    assert text.rstrip().endswith("     - not measured\n     - —")


def test_a_claim_checked_by_another_page_or_twice_fails_naming_the_file(app, monkeypatch):
    c = _fake_claims(monkeypatch)
    path = _check_on_page(app, monkeypatch, "plot_b", (c, *_records()))
    with pytest.raises(ExtensionError, match=rf"{path}: claim 'fake' belongs to plot_a"):
        measurements.claim_lines(app)
    path.unlink()
    path = _check_on_page(app, monkeypatch, "plot_a", (c, *_records()), (c, *_records()))
    with pytest.raises(ExtensionError, match=rf"{path}: claim 'fake' was checked twice"):
        measurements.claim_lines(app)


def test_a_damaged_outcome_file_fails_the_build_naming_file_and_line(app, monkeypatch):
    c = _fake_claims(monkeypatch)
    path = _check_on_page(app, monkeypatch, "plot_a", (c, *_records()))
    path.write_text(path.read_text(encoding="utf-8")[:-40] + "\n", encoding="utf-8")  # cut short
    with pytest.raises(ExtensionError, match=rf"malformed claim outcome {path}:1"):
        measurements.claim_lines(app)


def test_a_gpu_claim_on_a_cpu_build_and_a_fast_variant_that_did_not_run(app, monkeypatch):
    c = _fake_claims(monkeypatch, device="cuda")
    _check_on_page(app, monkeypatch, "plot_a", (c, *_records()))
    text = "\n".join(measurements.claim_lines(app))
    assert "not comparable on this machine: the source measured on a GPU" in text
    assert "yes" not in text.split("not comparable")[1]
    Path(app.srcdir, "auto", "_claims", "plot_a.jsonl").unlink()
    _check_on_page(app, monkeypatch, "plot_a", (c, _records()[0], None))
    text = "\n".join(measurements.claim_lines(app))
    assert "not measured: the faster variant was not timed on x86_64 CPU" in text
    assert "(:doc:`/auto/fam/plot_a`, t)" in text.split("not measured")[1]


def test_a_cpu_claim_on_a_gpu_build_names_the_gpu(app, monkeypatch):
    c = _fake_claims(monkeypatch)
    _check_on_page(app, monkeypatch, "plot_a", (c, *_records(machine=H100)))
    text = "\n".join(measurements.claim_lines(app))
    assert (
        "the source measured on a CPU, this build ran on NVIDIA H100 80GB HBM3 · CUDA 12.8" in text
    )


def test_the_timings_name_each_machine_once_with_its_thread_counts():
    one = Machine("cpu", "x86_64 CPU (AMD EPYC)", 1, None, "2.13.0")
    two = Machine("cpu", "x86_64 CPU (AMD EPYC)", 2, None, "2.13.0")
    rows = [measurements._Row(**{**GOOD, "machine": m}) for m in (two, one, H100)]
    line = measurements._machines_line(rows, lambda text, **values: text.format(**values))
    assert line == (
        "All timings below were taken on NVIDIA H100 80GB HBM3 · CUDA 12.8 · torch 2.13.0; "
        "x86_64 CPU (AMD EPYC) · torch 2.13.0, with 1 or 2 threads."
    )


def test_prose_over_the_limits_fails_naming_page_paragraph_and_count(tmp_path):
    long_paragraph = "# " + " ".join(["word"] * 121) + "\n"
    page = _page(tmp_path, "", "# %%\n# Start here\n#\n" + long_paragraph + "x = 1\n" + SUMMARY)
    with pytest.raises(
        ExtensionError,
        match=r"plot_x\.py: a paragraph of 121 words \(over 120\) starting 'word word",
    ):
        page_checks.check_prose_length(page)
    # Many short paragraphs: each within the limit, the page over 1,800 words.
    cells = "".join(
        f"# %%\n# Part {i}\n#\n# " + " ".join(["w"] * 100) + f"\nx{i} = {i}\n" for i in range(19)
    )
    page = _page(tmp_path, "", cells + SUMMARY)
    with pytest.raises(ExtensionError, match=r"plot_x\.py: 19\d\d words of prose \(over 1800\)"):
        page_checks.check_prose_length(page)
    # A directive's fields (the before-you-start box) are not a paragraph of prose.
    box = ".. effpt-before-you-start::\n   :learn: " + " ".join(["w"] * 130)
    page_checks.check_prose_length(_page(tmp_path, box, "x = 1\n" + SUMMARY))  # no error
    # Code and output do not count: a long code cell passes.
    page = _page(tmp_path, "", "# %%\n# Code\n" + "y = 1\n" * 2000 + SUMMARY)
    page_checks.check_prose_length(page)  # no error


def _gallery_with_thumbnails(tmp_path, pictures: dict[str, bytes], ran=None):
    """A two-family gallery whose pages (``family/stem``) have the thumbnails given."""
    families = sorted({key.split("/")[0] for key in pictures})
    for family in families:
        folder = tmp_path / "examples" / family
        folder.mkdir(parents=True)
        stems = [key.split("/")[1] for key in pictures if key.startswith(family + "/")]
        order = "".join(f"   {s}.py\n" for s in stems)
        (folder / "GALLERY_HEADER.rst").write_text(
            f"{family}\n---\n\nIntro.\n\n.. reading order:\n{order}", encoding="utf-8"
        )
    for key, picture in pictures.items():
        family, stem = key.split("/")
        (tmp_path / "examples" / family / f"{stem}.py").write_text('"""\nA\n=\n"""\n')
        out = tmp_path / "docs" / "auto" / family
        (out / "images" / "thumb").mkdir(parents=True, exist_ok=True)
        (out / "images" / "thumb" / f"sphx_glr_{stem}_thumb.png").write_bytes(picture)
        if ran is None or key in ran:
            (out / f"{stem}.cost.json").write_text('{"time": 1.5, "memory": 0}')
    return stub_app(tmp_path, families)


def test_two_pages_sharing_a_thumbnail_fail_the_build_naming_both(tmp_path):
    placeholder = b"\x89PNG the placeholder"
    app = _gallery_with_thumbnails(
        tmp_path,
        {"perf/plot_a": placeholder, "perf/plot_b": b"\x89PNG b", "train/plot_c": placeholder},
    )
    with pytest.raises(
        ExtensionError, match=r"share one thumbnail: auto/perf/plot_a, auto/train/plot_c"
    ):
        page_checks.check_thumbnails(app, None)


def test_distinct_thumbnails_and_pages_this_build_never_ran_pass(tmp_path):
    same = b"\x89PNG same"
    app = _gallery_with_thumbnails(
        tmp_path, {"perf/plot_a": b"\x89PNG a", "perf/plot_b": same, "train/plot_c": same}
    )
    with pytest.raises(ExtensionError):
        page_checks.check_thumbnails(app, None)
    # a page that never ran shows sphinx-gallery's placeholder until it runs: not counted
    app = _gallery_with_thumbnails(
        tmp_path / "restricted",
        {"perf/plot_a": b"\x89PNG a", "perf/plot_b": same, "train/plot_c": same},
        ran={"perf/plot_a", "perf/plot_b"},
    )
    page_checks.check_thumbnails(app, None)
