"""The Dagster UI in a real browser: `dagster dev` on loopback against a fresh instance with the demo
registered, driven by Playwright through Debian's Chromium (no browser download). `dagster dev` runs
the daemon too, which launches the runs the UI queues.

The test sees the asset graph and the demo book's partition, launches the demo book's book-level
run from the UI (Materialize all, one partition) and waits for the run to succeed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from reveriemem.core.demo import DEMO_SLUG, demo_book_path, demo_characters_path
from tests.servers import free_port, wait_until_answering

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
RUN_TIMEOUT_S = 420


def _chromium() -> str:
    found = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if found:
        return found
    if os.environ.get("REVERIEMEM_REQUIRE_BROWSER") == "1":
        pytest.fail("Chromium is missing but REVERIEMEM_REQUIRE_BROWSER=1: apt-get install -y chromium (.ci/run does)")
    pytest.skip("Chromium is not installed (apt-get install -y chromium)")


@pytest.fixture
def webserver(isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """`dagster dev` over the project's workspace, a fresh DAGSTER_HOME, the demo registered; yields its URL."""
    from reveriemem_dagster.cli import main

    dagster_home = isolated_home / "dagster"
    dagster_home.mkdir(parents=True)
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    result = CliRunner().invoke(main, ["add-book", str(demo_book_path()), "--characters",
                                       str(demo_characters_path()), "--name", DEMO_SLUG])
    assert result.exit_code == 0, result.output
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    log = (tmp_path / "webserver.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "dagster", "dev", "-w", str(ROOT / "workspace.yaml"), "-h", "127.0.0.1",
         "-p", str(port)], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(f"{url}/server_info", server, tmp_path / "webserver.log", "dagster dev")
        yield url
    finally:
        os.killpg(server.pid, signal.SIGINT)  # dagster dev, its webserver, daemon and code servers
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()


def _dismiss_welcome(page) -> None:  # type: ignore[no-untyped-def]
    """Dagster's first-visit community dialog ("Join the Dagster community"), whenever it shows: it may come up
    late, over the launch dialog, so Playwright skips it before each action or check that it would block."""
    welcome = page.get_by_role("dialog").filter(has_text="Join the Dagster")
    page.add_locator_handler(welcome, lambda overlay: overlay.get_by_role("button", name="Skip").click())


def test_the_ui_shows_the_graph_and_the_demo_partition_and_runs_the_demo_book(webserver, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    chromium = _chromium()
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(60_000)
        try:
            _drive(sync_api.expect, page, webserver)
        except AssertionError:
            page.screenshot(path=str(tmp_path / "ui.png"))  # what the browser showed, for the failure report
            raise
        finally:
            browser.close()


def _drive(expect, page, webserver: str) -> None:  # type: ignore[no-untyped-def]
    """The graph's groups, the demo's partition, then one run of the demo book launched and seen to succeed."""
    _dismiss_welcome(page)
    page.goto(f"{webserver}/asset-groups")
    for group in ("scene_preparation", "semantic_layer", "episodic", "personality"):
        expect(page.get_by_text(group, exact=True).first).to_be_visible()

    page.goto(f"{webserver}/assets/scenes?view=partitions")
    expect(page.get_by_text(DEMO_SLUG, exact=True).first).to_be_visible()
    expect(page.get_by_text("Missing (1)")).to_be_visible()

    page.goto(f"{webserver}/locations/reveriemem/jobs/book_memory")
    page.get_by_role("button", name="Materialize all…").click()
    page.get_by_role("button", name="All", exact=True).click()
    dialog = page.get_by_role("dialog").filter(has_text="Launch runs")
    expect(dialog).to_contain_text("1 partition")
    expect(dialog).to_contain_text(DEMO_SLUG)
    dialog.get_by_role("button", name="Launch 1 run").click()
    expect(page.get_by_role("dialog").filter(has_text="Launch runs")).to_have_count(0)  # launched before leaving

    page.goto(f"{webserver}/runs")
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while True:
        try:  # give the runs list time to load after each reload before looking for the status
            expect(page.get_by_text("Success", exact=True).first).to_be_visible(timeout=10_000)
            break
        except AssertionError:
            assert not page.get_by_text("Failure", exact=True).first.is_visible(), "the demo book's run failed"
            assert time.monotonic() < deadline, f"the demo book's run did not succeed in {RUN_TIMEOUT_S} s"
            page.reload()
    expect(page.get_by_text("book_memory").first).to_be_visible()

    page.goto(f"{webserver}/assets/scenes?view=partitions")
    expect(page.get_by_text("Materialized (1)")).to_be_visible()
