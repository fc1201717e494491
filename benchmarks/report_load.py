"""How fast does a 20,000-user-turn report.html load in headless Chromium, and how fast do filters respond?

Builds a synthetic run (realistic text lengths, ChatML prompts) with ``--turns`` user turns, writes the
report, then opens it ``--repeats`` times in fresh browser contexts and prints the medians as JSON:
``load_ms`` is navigation start to the viewer's first render (``window.__userturnReadyMs``),
``wall_ms`` the same seen from Python (goto to ready), ``filter_ms`` one label-filter change and
``search_ms`` one text search over all turns (after the 150 ms input debounce).

    PYTHONPATH=src python benchmarks/report_load.py [--turns 20000] [--repeats 5] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from synthetic_run import build_samples, write_run  # noqa: E402

from userturn.report.build import write_report  # noqa: E402
from userturn.report.run_data import load_run  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

FILTER_JS = """() => {
  const select = document.querySelector('select[name=label]');
  const start = performance.now();
  select.value = select.value === 'follow_up' ? '' : 'follow_up';
  select.dispatchEvent(new Event('change'));
  return performance.now() - start;
}"""

SEARCH_JS = """(needle) => new Promise((resolve) => {
  const status = document.getElementById('status');
  const input = document.querySelector('input[name=q]');
  const start = performance.now();
  const observer = new MutationObserver(() => { observer.disconnect(); resolve(performance.now() - start - 150); });
  observer.observe(status, {attributes: true, childList: true, characterData: true, subtree: true});
  input.value = needle;
  input.dispatchEvent(new Event('input'));
})"""


def build(out: Path, turns: int) -> Path:
    # 2 models x 2 datasets x 2 perturbations = 8 entries per item; greedy + 4 samples at T=0.7 -> 40 turns per item.
    items = -(-turns // 40)
    samples = build_samples(items=items, temperatures=(0.0, 0.7), k=4, text_scale=4)[:turns]
    run = load_run(write_run(out / "run", samples))
    return write_report([run], out / "report").html


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="write the run and report here instead of a temporary folder")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or Path(tmp)
        started = time.perf_counter()
        html = build(out, args.turns)
        build_s = time.perf_counter() - started
        loads, walls, filters, searches = [], [], [], []
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            for _ in range(args.repeats):
                context = browser.new_context(viewport={"width": 1280, "height": 1000})
                page = context.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                started = time.perf_counter()
                page.goto(html.as_uri())
                page.wait_for_selector("html[data-viewer-ready='1']", timeout=60_000)
                walls.append(1000 * (time.perf_counter() - started))
                loads.append(page.evaluate("window.__userturnReadyMs"))
                filters.append(page.evaluate(FILTER_JS))
                searches.append(page.evaluate(SEARCH_JS, "doubled"))
                if errors:
                    raise SystemExit(f"page errors: {errors}")
                context.close()
            browser.close()
        result = {
            "turns": args.turns,
            "html_mb": round(html.stat().st_size / 1e6, 2),
            "build_report_s": round(build_s, 2),
            "repeats": args.repeats,
            "load_ms": round(statistics.median(loads)),
            "wall_ms": round(statistics.median(walls)),
            "filter_ms": round(statistics.median(filters), 1),
            "search_ms": round(statistics.median(searches), 1),
            "load_ms_all": [round(v) for v in loads],
        }
        print(json.dumps(result))


if __name__ == "__main__":
    main()
