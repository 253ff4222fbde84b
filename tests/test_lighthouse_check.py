"""The Lighthouse runner's judgement (docs/_tools/lighthouse_check.py): facts fail, performance reports."""

from __future__ import annotations

import doctest

import lighthouse_check
import pytest
from lighthouse_check import BUDGETS, failed_facts, performance_verdict


def result(*, a11y=1.0, performance=0.5, requests=13, blocking=1, kib=90, cls=0.0) -> dict:
    refs = [{"id": "color-contrast", "weight": 7}]
    return {
        "categories": {
            "performance": {"score": performance, "auditRefs": []},
            "accessibility": {"score": a11y, "auditRefs": refs},
            "best-practices": {"score": 1.0, "auditRefs": []},
            "seo": {"score": 1.0, "auditRefs": []},
        },
        "audits": {
            "color-contrast": {"score": 1.0 if a11y == 1.0 else 0.0, "title": "Contrast"},
            "total-byte-weight": {"numericValue": kib * 1024},
            "network-requests": {"details": {"items": [{}] * requests}},
            "render-blocking-resources": {"details": {"items": [{}] * blocking}},
            "cumulative-layout-shift": {"numericValue": cls},
        },
    }


def test_doctests_pass():
    assert doctest.testmod(lighthouse_check).failed == 0


def test_a_slow_host_reports_performance_and_never_fails():
    slow = result(performance=0.42)
    assert failed_facts(slow) == []
    assert performance_verdict(0.42) == "does not hold here"


def test_an_accessibility_loss_fails_naming_the_audit():
    assert failed_facts(result(a11y=0.96)) == ["accessibility: color-contrast (0.00): Contrast"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"kib": 500}, "budget: compressed bytes 500 KiB over 400 KiB"),
        ({"requests": 40}, "budget: requests 40 over 25"),
        ({"blocking": 2}, "budget: render-blocking requests 2 over 1"),
        ({"cls": 0.25}, "budget: cumulative layout shift 0.25 over 0.1"),
    ],
)
def test_each_budget_fails_a_page_that_exceeds_it(change, expected):
    assert failed_facts(result(**change)) == [expected]


def test_a_budget_whose_audit_is_gone_raises_rather_than_passing():
    renamed = result()
    del renamed["audits"]["render-blocking-resources"]
    with pytest.raises(KeyError, match="render-blocking-resources"):
        failed_facts(renamed)
    assert set(BUDGETS) == {
        "compressed bytes",
        "requests",
        "render-blocking requests",
        "cumulative layout shift",
    }
