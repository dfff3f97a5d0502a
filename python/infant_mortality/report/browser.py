"""Headless Chromium: the report drawn as a browser draws it, for screenshots and the tests.

Chromium is driven through the DevTools protocol over a pipe (``--remote-debugging-pipe``:
JSON messages separated by NUL bytes on file descriptors 3 and 4), with no dependency. That
is what lets a test emulate a phone: a headless window cannot be narrower than 500 px, but
the protocol's device-metrics override can (420 px, touch, mobile viewport).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from infant_mortality.report.marts import ReportError

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-quic",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
]
# Widths of the committed screenshots: a desktop and a phone.
SCREEN_WIDTHS = (1400, 420)
# axe-core (npm registry), installed by `npm install --prefix .cache/npm axe-core` (git-ignored).
AXE_JS = Path(".cache/npm/node_modules/axe-core/axe.min.js")


def find_axe() -> Path | None:
    """The axe-core script: $AXE_CORE_JS, else the project's git-ignored npm folder."""
    for cand in (os.environ.get("AXE_CORE_JS"), Path(__file__).resolve().parents[3] / AXE_JS):
        if cand and Path(cand).is_file():
            return Path(cand)
    return None


def find_chromium() -> str | None:
    for cand in (os.environ.get("CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                 shutil.which("chromium-browser"), shutil.which("google-chrome")):
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return cand
    return None


def page_url(path, fragment: str = "") -> str:
    url = Path(path).resolve().as_uri()
    return url + (f"#{fragment}" if fragment else "")


class Browser:
    """One headless Chromium; `open()` loads a page in a tab of a given size."""

    def __init__(self, chromium: str | None = None):
        chromium = chromium or find_chromium()
        if chromium is None:
            raise ReportError("Chromium not found (install Debian's `chromium` or set $CHROMIUM)")
        self._profile = tempfile.TemporaryDirectory(prefix="imr-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def fds():  # the protocol pipe must be the child's fds 3 (read) and 4 (write)
            a, b = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [chromium, *CHROMIUM_FLAGS, "--remote-debugging-pipe", f"--user-data-dir={self._profile.name}",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=fds, close_fds=False,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._id = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 60):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise ReportError(f"Chromium: {method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise ReportError("Chromium did not answer in time")
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise ReportError(f"Chromium exited: {self.proc.stderr.read().decode(errors='replace')[-2000:]}")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def open(self, url: str, width: int, height: int, mobile: bool | None = None) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        mobile = width < 600 if mobile is None else mobile
        page.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})
        page.send("Runtime.enable")
        page.send("Page.enable")
        page.send("Page.navigate", {"url": url})
        return page

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except ReportError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_child, self._from_child):
            os.close(fd)
        self.proc.stderr.close()
        self._profile.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Page:
    def __init__(self, browser: Browser, session: str):
        self.browser, self.session = browser, session

    def send(self, method: str, params: dict | None = None, timeout: float = 60):
        return self.browser.send(method, params, session=self.session, timeout=timeout)

    def eval(self, expression: str):
        res = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in res:
            raise ReportError(f"JavaScript error: {res['exceptionDetails']}")
        return res["result"].get("value")

    def wait_rendered(self, timeout: float = 90) -> float:
        """Wait until report.js has drawn every visible figure; returns its time (ms) from navigation."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ms = self.eval("document.documentElement && document.documentElement.getAttribute('data-render-ms')")
            if ms is not None:
                return float(ms)
            time.sleep(0.1)
        raise ReportError(f"the report did not finish drawing in {timeout:.0f} s")

    def console_errors(self) -> list[str]:
        out = []
        for e in self.browser.events:
            if e.get("sessionId") != self.session:
                continue
            if e.get("method") == "Runtime.exceptionThrown":
                out.append(json.dumps(e["params"]["exceptionDetails"])[:500])
            if e.get("method") == "Runtime.consoleAPICalled" and e["params"].get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in e["params"]["args"]))
        return out

    def screenshot(self, path, selector: str | None = None, max_height: int = 16000) -> Path:
        """PNG of the whole page (or of one element), as wide as the viewport."""
        if selector:
            box = self.eval(f"(function(){{var r=document.querySelector({json.dumps(selector)})"
                            ".getBoundingClientRect();return [r.left+scrollX,r.top+scrollY,r.width,r.height];})()")
            x, y, w, h = box
            clip = {"x": 0, "y": max(0, y - 8), "width": self.eval("document.documentElement.clientWidth"),
                    "height": min(h + 16, max_height), "scale": 1}
        else:
            clip = {"x": 0, "y": 0, "width": self.eval("document.documentElement.clientWidth"),
                    "height": min(self.eval("document.documentElement.scrollHeight"), max_height), "scale": 1}
        data = self.send("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True})
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data["data"]))
        return path

    def axe_violations(self, axe_js: Path) -> list[dict]:
        """axe-core's WCAG 2.x A/AA audit of the page as drawn: [{id, impact, help, nodes}]."""
        self.eval(Path(axe_js).read_text(encoding="utf-8"))
        res = self.send("Runtime.evaluate", {
            "expression": "axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', "
                          "'wcag21aa', 'best-practice']}}).then(function (r) { return r.violations.map("
                          "function (v) { return {id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map("
                          "function (n) { return n.target.join(' ') + ' ' + (n.failureSummary || '').slice(0, 200); "
                          "}).slice(0, 8), count: v.nodes.length}; }); })",
            "awaitPromise": True, "returnByValue": True}, timeout=180)
        if "exceptionDetails" in res:
            raise ReportError(f"axe-core failed: {res['exceptionDetails']}")
        return res["result"]["value"]

    def click(self, selector: str, index: int = 0) -> None:
        """A real mouse click (press and release) at the centre of the index-th element matching
        selector, scrolled into view first: the events a user's click sends, not synthetic ones
        (Plotly's menus ignore a dispatched JavaScript click)."""
        found = self.eval(
            f"(function(){{var e=document.querySelectorAll({json.dumps(selector)})[{index}];if(!e)return null;"
            "e.scrollIntoView({block:'center'});var r=e.getBoundingClientRect();"
            "return [r.left+r.width/2,r.top+r.height/2];})()")
        if found is None:
            raise ReportError(f"no element {selector!r} number {index + 1} to click")
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": found[0], "y": found[1], "button": "left",
                                                   "clickCount": 1})

    def key(self, key: str, code: str, key_code: int) -> None:
        """A key pressed and released, as the keyboard sends it to the focused element."""
        for kind in ("keyDown", "keyUp"):
            self.send("Input.dispatchKeyEvent", {"type": kind, "key": key, "code": code,
                                                 "windowsVirtualKeyCode": key_code})

    def choose_menu_option(self, figure_id: str, option: int, timeout: float = 10) -> str:
        """Choose the option number `option` of a figure's menu from the keyboard, as a user does:
        focus the select, press the down arrow until it is reached; returns the option's label
        once the figure is redrawn."""
        self.eval(f"document.getElementById('{figure_id}-menu').scrollIntoView({{block:'center'}});"
                  f"document.getElementById('{figure_id}-menu').focus()")
        # Plotly redraws the figure after the choice; a screenshot before it ends shows empty panels.
        self.eval(f"(function(){{var g=document.getElementById('{figure_id}');window.__imrDrawn=0;"
                  "g.once('plotly_afterplot',function(){window.__imrDrawn=1;});})()")
        current = self.eval(f"Number(document.getElementById('{figure_id}-menu').value)")
        for _ in range(option - current):
            self.key("ArrowDown", "ArrowDown", 40)
        label = self.eval(f"(function(){{var s=document.getElementById('{figure_id}-menu');"
                          "return s.options[s.selectedIndex].text;})()")
        deadline = time.monotonic() + timeout
        shown = None
        while time.monotonic() < deadline:
            shown = self.eval(f"Number(document.getElementById('{figure_id}-menu').value)")
            if shown == option and self.eval("window.__imrDrawn"):
                # Two animation frames: the redrawn SVG is painted before anything is captured.
                self.send("Runtime.evaluate", {"expression": "new Promise(function(r){requestAnimationFrame("
                                               "function(){requestAnimationFrame(r);});})", "awaitPromise": True})
                return label
            time.sleep(0.1)
        raise ReportError(f"{figure_id}: option {option} was chosen but the menu shows {shown!r} "
                          f"or the figure was not redrawn")


# Map options screenshotted besides the default one (the crude rate): (file name, measure), each
# the measure's first option (the first indicator and period).
MAP_OPTION_SHOTS = (("map-smoothed", "smoothed"), ("map-bym2", "bym2"), ("map-bym2-exceedance", "bym2_exceedance"),
                    ("map-clusters", "clusters"))


def figure_block(fig_id: str) -> str:
    """The selector of a figure with its menu and caption."""
    return f"figure:has(#{fig_id})"


def map_option(page: Page, region_code: str, measure: str) -> int:
    """The number of the map menu's first option showing `measure` (layout.meta.options, as drawn)."""
    found = page.eval(f"document.getElementById('fig-map-{region_code}').layout.meta.options"
                      f".findIndex(function (o) {{ return o.measure === {json.dumps(measure)}; }})")
    if found is None or found < 0:
        raise ReportError(f"the map of region {region_code} has no option showing {measure}")
    return found


def write_screenshots(report: Path, outdir, region_code: str = "13") -> list[Path]:
    """The committed views of a report, at the desktop and the phone width: the top of the
    page (`page-<width>.png`), each figure of the region (`<figure>-<width>.png`), and the map
    after choosing each option of MAP_OPTION_SHOTS in its menu, as a user does."""
    outdir = Path(outdir)
    paths = []
    with Browser() as browser:
        for width in SCREEN_WIDTHS:
            page = browser.open(page_url(report, f"region={region_code}"), width, 900)
            page.wait_rendered()
            paths.append(page.screenshot(outdir / f"page-{width}.png", max_height=2600))
            for name in ("ranking", "funnel", "map", "inequity"):
                paths.append(page.screenshot(outdir / f"{name}-{width}.png", figure_block(f"fig-{name}-{region_code}")))
            paths.append(page.screenshot(outdir / f"trends-{width}.png", figure_block(f"fig-trends-{region_code}-imr"),
                                         max_height=1800))
            for name, measure in MAP_OPTION_SHOTS:
                page.choose_menu_option(f"fig-map-{region_code}", map_option(page, region_code, measure))
                page.eval("window.scrollTo(0, 0)")
                paths.append(page.screenshot(outdir / f"{name}-{width}.png", figure_block(f"fig-map-{region_code}")))
            paths.append(page.screenshot(outdir / f"table-{width}.png", f".table-wrap[data-hint-for=\"comparison-table-{region_code}\"]",
                                         max_height=900))
    return paths
