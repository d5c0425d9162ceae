"""The dashboard's static part, over a real socket and without a browser: where it
mounts, the headers that keep it inert, and the files shipped as package data."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import httpx
from dashboard_support import Dash

from engram.surfaces.dashboard import CSP

STATIC = Path(str(resources.files("engram.surfaces.dashboard").joinpath("static")))


def test_ui_redirects_to_the_page_served_under_a_strict_csp(dash: Dash) -> None:
    moved = httpx.get(f"{dash.base}/ui", follow_redirects=False, timeout=30)
    assert moved.status_code == 307
    assert moved.headers["location"] == "/ui/"
    page = httpx.get(f"{dash.base}/ui/", timeout=30)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == CSP
    assert "script-src 'self';" in CSP
    assert "unsafe-inline" not in CSP
    assert "frame-ancestors 'none'" in CSP
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "no-referrer"
    for asset, kind in (("app.js", "javascript"), ("app.css", "text/css")):
        got = httpx.get(f"{dash.base}/ui/{asset}", timeout=30)
        assert got.status_code == 200
        assert kind in got.headers["content-type"]
        assert got.headers["content-security-policy"] == CSP


def test_the_page_is_outside_the_api_schema_and_a_missing_file_is_a_problem(dash: Dash) -> None:
    schema = httpx.get(f"{dash.base}/openapi.json", timeout=30).json()
    assert not [path for path in schema["paths"] if path.startswith("/ui")]
    missing = httpx.get(f"{dash.base}/ui/nothing-here.js", timeout=30)
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"


def test_the_shipped_files_load_nothing_from_elsewhere_and_inline_nothing() -> None:
    assert {p.name for p in STATIC.iterdir()} >= {"index.html", "app.js", "app.css"}
    html = (STATIC / "index.html").read_text()
    script = (STATIC / "app.js").read_text()
    assert re.findall(r"<script[^>]*>", html) == ['<script type="module" src="app.js">']
    assert "</script>" in html  # the one tag is closed with nothing inside
    assert not re.search(r"\son[a-z]+=", html)  # no inline event handlers
    assert " style=" not in html
    assert not re.search(r"https?://", html + script)  # nothing fetched from another origin
    # server values go in as text: no markup sinks in the script
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script
    assert 'setAttribute("style"' not in script
