"""docs/alerts.yml and the Grafana dashboard name only series the exporter has."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import yaml

from resumable.observability.metrics import METRIC_NAMES

DOCS = Path(__file__).resolve().parents[2] / "docs"
SERIES = re.compile(r"\b(resumable_[a-z_]+)\b")
RUNBOOK_SECTIONS = re.compile(r"^## (.+)$", re.MULTILINE)


def alert_rules() -> list[dict[str, object]]:
    loaded = yaml.safe_load((DOCS / "alerts.yml").read_text(encoding="utf-8"))
    return [rule for group in loaded["groups"] for rule in group["rules"]]


def test_every_alert_names_exported_series_and_a_runbook_section() -> None:
    rules = alert_rules()
    assert len(rules) >= 12
    sections = {
        re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")
        for title in RUNBOOK_SECTIONS.findall(
            (DOCS / "operations.md").read_text(encoding="utf-8")
        )
    }
    for rule in rules:
        expr = str(rule["expr"])
        named = set(SERIES.findall(expr))
        assert named or "up{" in expr, rule["alert"]
        assert named <= METRIC_NAMES, (rule["alert"], named - METRIC_NAMES)
        anchor = str(rule["annotations"]["runbook"]).split("#")[1]  # type: ignore[index]
        assert anchor in sections, (rule["alert"], anchor)


def test_promtool_accepts_the_alert_rules_when_it_is_installed() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:  # the YAML and the names are checked above either way
        # .ci/run installs it: there, its absence is a failure
        assert os.environ.get("RESUMABLE_REQUIRE_SERVICES") != "1", "no promtool"
        return
    subprocess.run(
        [promtool, "check", "rules", str(DOCS / "alerts.yml")],
        check=True,
        capture_output=True,
        timeout=60,
    )


def test_every_dashboard_panel_queries_exported_series() -> None:
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text("utf-8"))
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    named = {name for expr in exprs for name in SERIES.findall(expr)}
    assert named <= METRIC_NAMES, named - METRIC_NAMES
    # every family the exporter has is on the dashboard
    families = {re.sub(r"_(total|bucket|sum|count)$", "", n) for n in METRIC_NAMES}
    shown = {re.sub(r"_(total|bucket|sum|count)$", "", n) for n in named}
    assert families - shown <= {
        "resumable_step_duration_seconds",
        "resumable_runs_claimed",
        "resumable_runs_refreshed_timestamp_seconds",
    }


def test_every_metric_the_docs_name_is_exported() -> None:
    pages = [DOCS.parent / "README.md", *DOCS.rglob("*.md")]
    for page in pages:
        named = set(SERIES.findall(page.read_text(encoding="utf-8")))
        unknown = {n for n in named - METRIC_NAMES if f"{n}_bucket" not in METRIC_NAMES}
        assert not unknown, (page.name, unknown)
