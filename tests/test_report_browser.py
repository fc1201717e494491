"""report.html in headless Chromium, used the way a person would: look, filter, search, follow a permalink.

Needs Debian's ``chromium`` at /usr/bin/chromium and the ``playwright`` Python package (its own browser
downloads are never used). Without them the tests skip, except under CI (``CI`` set), where they fail.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path

import pytest
from synthetic_run import build_samples, write_run

from userturn.report.build import write_report
from userturn.report.html import entry_key
from userturn.report.run_data import load_run

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
REPO_ROOT = Path(__file__).resolve().parents[1]
PWNED = "window.__pwned=1"


def _sync_playwright():
    missing = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing, sync_playwright = "the playwright package is not installed", None
    if not Path(CHROMIUM).exists():
        missing = f"{CHROMIUM} is missing (apt-get install chromium)"
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"browser tests must run in CI: {missing}")
        pytest.skip(missing)
    return sync_playwright


@pytest.fixture(scope="module")
def browser():
    sync_playwright = _sync_playwright()
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    base = tmp_path_factory.mktemp("browser")
    run = load_run(write_run(base / "demo-run", items=6, k=3))
    files = write_report([run], base / "demo-run" / "report")
    return run, files


class Page:
    """A fresh browser page on a report, collecting console errors and uncaught exceptions."""

    def __init__(self, browser, html: Path, *, bypass_csp: bool = True) -> None:
        # The report's CSP also forbids the eval() behind Playwright's wait_for_function; bypassing it
        # in tests also proves that escaping alone keeps hostile text inert. test_csp_* checks the CSP.
        self.context = browser.new_context(viewport={"width": 1280, "height": 1000}, bypass_csp=bypass_csp)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type in ("error", "warning") else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.url = html.resolve().as_uri()

    def open(self, fragment: str = ""):
        self.page.goto(self.url + fragment)
        self.page.wait_for_selector("html[data-viewer-ready='1']")
        return self.page

    def status(self) -> tuple[int, int]:
        status = self.page.locator("#status")
        return int(status.get_attribute("data-entries")), int(status.get_attribute("data-turns") or -1)


@pytest.fixture
def open_page(browser):
    pages: list[Page] = []

    def opener(html: Path, **options) -> Page:
        pages.append(Page(browser, html, **options))
        return pages[-1]

    yield opener
    for page in pages:
        page.context.close()
        assert page.errors == [], f"console errors: {page.errors}"


def test_tables_and_plots_are_visible(report, open_page):
    run, files = report
    page = open_page(files.html).open()
    results = page.locator("#table-results")
    assert results.is_visible()
    assert results.locator("tbody tr").count() == len(run.rows)
    assert page.locator("#table-effects").is_visible() and page.locator("#table-labels").is_visible()
    plots = page.locator("img.plot")
    assert plots.count() == 4
    for index in range(4):
        plot = plots.nth(index)
        plot.scroll_into_view_if_needed()
        assert plot.is_visible()
        assert plot.evaluate("img => img.complete && img.naturalWidth > 200")


def test_filters_change_the_visible_entries(report, open_page):
    run, files = report
    viewer = open_page(files.html)
    page = viewer.open()
    total_entries, total_turns = viewer.status()
    assert total_turns == len(run.samples) and page.locator("article.entry").count() == 20

    page.select_option("select[name=model]", "tiny-chat-b")
    entries, turns = viewer.status()
    assert entries == total_entries // 2
    assert turns == sum(s["model"] == "tiny-chat-b" for s in run.samples)
    chips = page.locator("article.entry .chip[data-kind=model]").all_inner_texts()
    assert chips and set(chips) == {"tiny-chat-b"}

    page.select_option("select[name=label]", "follow_up")
    page.select_option("select[name=temperature]", "0.7")
    entries, turns = viewer.status()
    expected = [s for s in run.samples if s["model"] == "tiny-chat-b" and s["label"] == "follow_up"
                and s["temperature"] == 0.7]
    assert turns == len(expected) > 0
    labels = page.locator("li.turn").evaluate_all("items => items.map(i => i.dataset.label)")
    assert labels and set(labels) == {"follow_up"}

    page.select_option("select[name=correct]", "incorrect")
    flags = page.locator("article.entry .chip[data-kind=correct]").all_inner_texts()
    assert set(flags) <= {"incorrect"}
    assert viewer.status()[1] == sum(1 for s in expected if s["correct"] is False)

    page.click("button.reset")
    assert viewer.status() == (total_entries, total_turns)


def test_filters_live_in_the_url_fragment(report, open_page):
    _, files = report
    viewer = open_page(files.html)
    page = viewer.open()
    page.select_option("select[name=label]", "acknowledgement")
    assert "label=acknowledgement" in page.evaluate("location.hash")
    filtered = viewer.status()
    page.reload()
    page.wait_for_selector("html[data-viewer-ready='1']")
    assert page.input_value("select[name=label]") == "acknowledgement"
    assert viewer.status() == filtered


def test_search_finds_a_known_user_turn(report, open_page):
    run, files = report
    counts = Counter(s["user_turn"] for s in run.samples)
    known = next(s for s in run.samples[len(run.samples) // 2:]
                 if s["label"] == "follow_up" and counts[s["user_turn"]] == 1)
    viewer = open_page(files.html)
    page = viewer.open()
    page.fill("input[name=q]", known["user_turn"].upper())
    page.wait_for_function("document.querySelector('#status').dataset.turns === '1'")
    assert viewer.status() == (1, 1)
    turn = page.locator("li.turn")
    assert turn.count() == 1
    assert turn.locator(".user-turn").inner_text() == known["user_turn"]
    assert turn.locator("mark").inner_text() == known["user_turn"]
    assert page.locator("article.entry .block.query .text").inner_text() == known["query"]


def test_permalink_opens_the_right_entry(report, open_page):
    run, files = report
    target = run.samples[-1]  # sorted last: far beyond the first page
    key = entry_key(run.name, target)
    viewer = open_page(files.html)
    page = viewer.open(f"#entry={key}")
    article = page.locator("article.entry")
    assert article.count() == 1 and article.get_attribute("data-key") == key
    assert article.locator(".block.query .text").inner_text() == target["query"]
    assert target["user_turn"] in article.locator("ol.turns").inner_text() or not target["user_turn"]
    assert article.is_visible() and article.evaluate("a => a.getBoundingClientRect().top < innerHeight")

    # Following a permalink from the list works too, and "show all" goes back to the list.
    page.click("button.show-all")
    first = page.locator("article.entry").first
    first_key = first.get_attribute("data-key")
    first.locator("a.permalink").click()
    page.wait_for_function(f"location.hash === '#entry={first_key}'")
    assert page.locator("article.entry").count() == 1
    assert page.locator("article.entry").get_attribute("data-key") == first_key


def test_rendered_prompt_shows_on_demand(report, open_page):
    run, files = report
    page = open_page(files.html).open()
    turn = page.locator("li.turn").first
    prompt = turn.locator("details.prompt")
    assert prompt.locator("pre").count() == 0  # built lazily
    prompt.locator("summary").click()
    text = prompt.locator("pre").inner_text()
    assert text.startswith("<|im_start|>user\n") and text.rstrip().endswith("<|im_start|>user")


def test_viewer_screenshot_is_kept_as_artifact(report, open_page):
    _, files = report
    page = open_page(files.html).open()
    page.select_option("select[name=label]", "follow_up")
    page.locator("li.turn details.prompt summary").first.click()
    page.evaluate("document.getElementById('viewer').scrollIntoView()")
    shot = files.html.parent / "report-viewer.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 20_000
    artifacts = REPO_ROOT / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    shutil.copyfile(shot, artifacts / "report-viewer.png")


PAYLOADS = {
    "query": "<script>window.__pwned=1</script> and </textarea><textarea> in a query",
    "response": '<img src=x onerror="window.__pwned=1"> then </script><script>window.__pwned=1</script>',
    "user_turn": "javascript:window.__pwned=1 <svg onload=window.__pwned=1> </textarea>",
    "model": "<img src=x onerror=window.__pwned=1>",
}


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory):
    samples = build_samples(items=2, k=2, payloads=PAYLOADS)
    samples[0]["label"] = "<b onmouseover=window.__pwned=1>label</b>"
    samples[0]["label_reason"] = "<script>window.__pwned=1</script>"
    samples[0]["item_id"] = 'x"><script>window.__pwned=1</script>'
    base = tmp_path_factory.mktemp("hostile")
    run = load_run(write_run(base / "run", samples))
    return run, write_report([run], base / "report")


def test_hostile_text_shows_literally_and_never_runs(hostile_report, open_page):
    run, files = hostile_report
    viewer = open_page(files.html)
    page = viewer.open()
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert PAYLOADS["model"] in page.locator("#table-results").inner_text()

    page.fill("input[name=q]", "window.__pwned")
    page.wait_for_function("location.hash.includes('q=window.__pwned')")
    assert viewer.status()[0] > 0
    page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
    page.wait_for_function("document.querySelectorAll('details > pre, details > .context').length === "
                           "document.querySelectorAll('details').length")
    text = page.locator("#entries").inner_text()
    for payload in PAYLOADS.values():
        assert payload in text
    assert samples_label(run) in text and "<script>window.__pwned=1</script>" in text
    assert page.locator("#entries img, #entries script, #entries svg, #entries textarea").count() == 0
    assert page.locator("a[href^='javascript:' i]").count() == 0
    assert page.locator("[onerror], [onload], [onmouseover]").count() == 0

    page.select_option("select[name=label]", samples_label(run))
    assert viewer.status()[1] == 1
    page.locator("li.turn .label-badge").hover()
    assert page.evaluate("typeof window.__pwned") == "undefined"


def test_csp_blocks_injected_scripts_and_network(report, open_page):
    _, files = report
    viewer = open_page(files.html, bypass_csp=False)
    page = viewer.open()
    injected = page.evaluate("""() => {
        const s = document.createElement('script');
        s.textContent = 'window.__inline = 1';
        document.body.appendChild(s);
        return typeof window.__inline;
    }""")
    assert injected == "undefined"
    assert viewer.errors and all("Content Security Policy" in e for e in viewer.errors)
    viewer.errors.clear()
    assert viewer.status()[0] > 0  # the report's own script still ran


def samples_label(run) -> str:
    return run.samples[0]["label"]
