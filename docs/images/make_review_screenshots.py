"""Makes docs/images/review.png and docs/images/review-pairwise.png: the review page of the shop
scenario's sample run, and the pairwise page of that run against a copy with other answers.

    python docs/images/make_review_screenshots.py            # writes both PNGs beside this file
    python docs/images/make_review_screenshots.py --out /tmp # elsewhere

Runs the shop scenario's seeded 12-case sample (``sample=12, seed=1``, no oracle reruns) into
a temporary folder, gives a few labels to a case with every step (route, SQL with rows,
retrieved chunks, answer), serves the page on 127.0.0.1 and takes the screenshots in headless
Chromium through WebDriver. Needs Debian's ``chromium`` and ``chromium-driver``; nothing is
downloaded (the driver is the local ``chromedriver``, never Selenium Manager's).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CASE = "q003"  # routed to sql and blog: every step, SQL with a row, five chunks, an answer
WIDTH, HEIGHT = 1280, 1400  # the pairwise page is shorter: 720
BETTER = ("Yes: the grey Boiled Wool Coat by Alba Knit is 179.00 €, under your 200. To keep "
          "it looking good, brush it with a soft clothes brush after each wear, let it air "
          "on a wide wooden hanger between wears, and never hang it up damp.")


def browser():
    """Headless Chromium driven by the local chromedriver."""
    from selenium import webdriver

    driver_path = shutil.which("chromedriver")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if driver_path is None or chromium is None:
        sys.exit("needs Debian's chromium and chromium-driver "
                 "(apt-get install chromium chromium-driver)")
    os.environ["SE_OFFLINE"] = "1"  # never let Selenium Manager fetch anything
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                f"--window-size={WIDTH},{HEIGHT}", "--force-device-scale-factor=1",
                "--disable-background-networking", "--disable-component-update",
                "--no-first-run"):
        options.add_argument(arg)
    return webdriver.Chrome(options=options,
                            service=webdriver.ChromeService(executable_path=driver_path))


def serve(app):
    from evalharness.review.server import make_server

    server = make_server(app, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/?t={app.token}"


def other_run(run: Path, folder: Path) -> Path:
    """A copy of ``run`` with a better answer to CASE, other answers to a few more cases, and
    another start time (so another run id)."""
    shutil.copytree(run, folder)
    lines = (folder / "results.jsonl").read_text(encoding="utf-8").splitlines()
    out = []
    for n, line in enumerate(lines):
        result = json.loads(line)
        generator = result["trace"].get("generator")
        if generator and result["case"]["id"] == CASE:
            generator["answer"] = BETTER
        elif generator and n % 3 == 0:
            generator["answer"] = "Sorry, I could not find anything about that."
        out.append(json.dumps(result))
    (folder / "results.jsonl").write_text("\n".join(out) + "\n", encoding="utf-8")
    manifest = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    manifest["started_at"] = "2026-12-01T09:00:00Z"
    (folder / "run.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return folder


def shoot(driver, url: str, path: Path, height: int = HEIGHT) -> None:
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": WIDTH, "height": height, "deviceScaleFactor": 1, "mobile": False})
    if os.environ.get("DARK"):  # to check the dark scheme by eye: DARK=1
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {
            "features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    driver.get(url)
    time.sleep(0.6)  # the page scrolls (smoothly) to its first unlabelled target
    driver.execute_script("window.scrollTo({top: 0, behavior: 'instant'})")  # the case's top
    time.sleep(0.2)
    errors = driver.execute_script(
        "return document.getElementById('console-errors').textContent")
    if errors.strip():
        sys.exit(f"{url}: the page reported errors:\n{errors}")
    driver.save_screenshot(str(path))
    print(f"wrote {path} ({path.stat().st_size // 1024} KB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="Folder for the PNGs.")
    args = parser.parse_args()

    import evalharness
    from evalharness.review.server import App, Pairing, new_token
    from evalharness.review.session import Review

    with tempfile.TemporaryDirectory(prefix="evalharness-shots-") as tmp:
        run = Path(tmp) / "shop"
        evalharness.run_scenario(ROOT / "scenarios" / "shop.yaml", out=run, sample=12,
                                 seed=1, headroom=False)
        rev = Review.open(run)
        app = App(rev, new_token(), set(), "ana")
        for target, label, note in [
                (("router", "route_accuracy", ""), "yes", ""),
                (("text2sql", "equivalent", ""), "agree", ""),
                (("text2sql", "execution_accuracy", ""), "no",
                 "drops the 'under 200' filter"),
                (("retriever", "recall@5", ""), "disagree", "")]:
            app.store({"case": CASE, "component": target[0], "metric": target[1],
                       "item": target[2], "label": label, "reviewer": "ana", "note": note})

        driver = browser()
        try:
            server, url = serve(app)
            try:
                shoot(driver, f"{url}&i={app.ids.index(CASE)}&r=ana", args.out / "review.png")
            finally:
                server.shutdown()

            rev_b = Review.open(other_run(run, Path(tmp) / "shop-changed"))
            pairing = Pairing(rev, rev_b, new_token(), app.ids)
            pair = App(rev, new_token(), set(), "ana", pairing)
            pair.store({"case": CASE, "choice": "left" if not pairing.a_is_left(CASE)
                        else "right", "reviewer": "ana", "note": ""})  # B: the better one
            server, url = serve(pair)
            try:
                shoot(driver, f"{url}&i={pairing.ids.index(CASE)}&r=ana",
                      args.out / "review-pairwise.png", height=720)
            finally:
                server.shutdown()
        finally:
            driver.quit()


if __name__ == "__main__":
    main()
