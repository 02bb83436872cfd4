#!/usr/bin/python3
"""Opens a `sinkc report` HTML file in Debian's chromium (headless, driven over
WebDriver by Debian's chromedriver and selenium) and checks what a reader
would see: no console error, no uncaught page error, no network request, no
script, and every chart (figure.chart) drew: one <svg> of a real size whose
pixels have ink, and a plot area with colored data marks (lines, bars, heatmap
cells), not just gray axes.

    check_report.py REPORT.html OUT_DIR [MIN_CHARTS]

Writes OUT_DIR/report.png (the whole page) and OUT_DIR/charts/*.png (each
chart). Exits 1 on any problem.
"""
import base64
import io
import json
import os
import re
import sys
import tempfile

from PIL import Image
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By


def ink(image):
    """Share of pixels that are not background, and of pixels with a clear hue
    (data marks: axes, grid and labels are gray)."""
    pixels = list(image.convert("RGB").getdata())
    if not pixels:
        return 0.0, 0.0
    inked = sum(1 for r, g, b in pixels if 255 - min(r, g, b) > 24)
    colored = sum(1 for r, g, b in pixels if max(r, g, b) - min(r, g, b) > 60)
    return inked / len(pixels), colored / len(pixels)


def document_rect(driver, element):
    """The element's box in CSS pixels from the document's top-left corner."""
    return driver.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "return {x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height};",
        element)


def whole_page(driver):
    """A screenshot of the whole document (beyond the viewport), and its scale in pixels per CSS pixel."""
    size = driver.execute_script(
        "return {width: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight};")
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}})
    image = Image.open(io.BytesIO(base64.b64decode(shot["data"])))
    image.load()
    return image, image.width / size["width"]


def crop(page, scale, rect):
    box = (round(rect["x"] * scale), round(rect["y"] * scale),
           round((rect["x"] + rect["width"]) * scale), round((rect["y"] + rect["height"]) * scale))
    return page.crop(box)


def launch(chromium, profile):
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--hide-scrollbars", "--force-device-scale-factor=1",
                "--window-size=1400,1000", f"--user-data-dir={profile}"):
        options.add_argument(arg)
    # Console messages (errors and uncaught exceptions) and the network events of the performance log.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    service = Service(executable_path=os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    return webdriver.Chrome(service=service, options=options)


def network_problems(driver, page_url):
    """Requests the report made beyond its own file (the browser's own pages, its new-tab page among them,
    load chrome:// resources and may try the network: those are not the report's)."""
    problems, ours = [], set()
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        method, params = message.get("method"), message.get("params", {})
        if method == "Network.requestWillBeSent" and params.get("documentURL") == page_url:
            ours.add(params.get("requestId"))
            url = params.get("request", {}).get("url", "")
            if not url.startswith(("file:", "data:")):
                problems.append(f"network request: {url}")
        elif method == "Network.loadingFailed" and params.get("requestId") in ours:
            problems.append(f"failed request: {params.get('errorText')} ({params.get('type')})")
    if not ours:
        problems.append(f"the performance log shows no request for {page_url}: the network check saw nothing")
    return problems


def console_problems(driver):
    # SEVERE is console.error, an uncaught exception, or a resource that failed to load.
    return [f"console error: {entry['message']}" for entry in driver.get_log("browser")
            if entry.get("level") == "SEVERE"]


def check(driver, html, out_dir, min_charts):
    problems = []
    page_url = "file://" + html
    driver.get(page_url)
    driver.execute_script("return document.readyState")  # get() returns once the load event fired
    scripts = driver.execute_script("return document.scripts.length")
    if scripts != 0:
        problems.append(f"{scripts} <script> element(s): the report must render without script")
    page, scale = whole_page(driver)
    page.save(os.path.join(out_dir, "report.png"))

    figures = driver.find_elements(By.CSS_SELECTOR, "figure.chart")
    if len(figures) < min_charts:
        problems.append(f"{len(figures)} charts, expected at least {min_charts}")
    for k, figure in enumerate(figures):
        chart = figure.get_attribute("data-chart") or f"chart{k}"
        svgs = figure.find_elements(By.TAG_NAME, "svg")
        if len(svgs) != 1:
            problems.append(f"{chart}: {len(svgs)} <svg> elements, expected 1")
            continue
        box = document_rect(driver, svgs[0])
        if box["width"] < 150 or box["height"] < 80:
            problems.append(f"{chart}: drawn at {box}, too small or not at all")
            continue
        drawn = crop(page, scale, box)
        drawn.save(os.path.join(out_dir, "charts", re.sub(r"[^A-Za-z0-9_.-]", "_", chart) + ".png"))
        inked, _ = ink(drawn)
        # Data marks inside the plot area (the legend's swatches are outside it).
        areas = figure.find_elements(By.CSS_SELECTOR, ".plot-area")
        if len(areas) != 1:
            problems.append(f"{chart}: no plot area (rect.plot-area) to look into")
            continue
        _, colored = ink(crop(page, scale, document_rect(driver, areas[0])))
        verdict = "ok" if inked > 0.01 and colored > 0.002 else "BLANK"
        print(f"{verdict} {chart}: {round(box['width'])}x{round(box['height'])} px, {100 * inked:.1f}% ink, "
              f"{100 * colored:.2f}% of the plot area colored")
        if verdict != "ok":
            problems.append(f"{chart}: blank (ink {inked:.4f}, plot area colored {colored:.4f})")
    print(f"page: {len(figures)} charts; screenshots in {os.path.abspath(out_dir)}")
    return problems + console_problems(driver) + network_problems(driver, page_url)


def main(argv):
    if len(argv) < 3:
        print("usage: check_report.py REPORT.html OUT_DIR [MIN_CHARTS]", file=sys.stderr)
        return 2
    html, out_dir = os.path.abspath(argv[1]), argv[2]
    min_charts = int(argv[3]) if len(argv) > 3 else 1
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    if not os.path.exists(chromium):
        print(f"FAIL: no browser at {chromium} (install Debian's chromium: scripts/setup.sh --tests)", file=sys.stderr)
        return 1
    os.makedirs(os.path.join(out_dir, "charts"), exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="profile-", dir=out_dir) as profile:
        driver = launch(chromium, profile)  # a fresh profile for every launch
        try:
            problems = check(driver, html, out_dir, min_charts)
        finally:
            driver.quit()
    for problem in problems:
        print("FAIL: " + problem, file=sys.stderr)
    print(f"{len(problems)} problem(s)" if problems
          else "report rendered: every chart drew, no console error, no network")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
