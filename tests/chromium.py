"""Headless Chromium driven over the DevTools protocol (websocket-client), for page checks.

    with Chromium(tmp_path / "profile") as page:
        page.open(path_to_html)              # waits for the load event
        page.evaluate("document.title")
        page.screenshot(tmp_path / "shot.png")
        page.errors                           # console errors, uncaught exceptions, failed loads

Chromium runs with a fresh profile, no network services, on a loopback debugging port.
Protocol reference: https://chromedevtools.github.io/devtools-protocol/ (Page, Runtime, Log).
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "--window-size=1600,1200"]


def find_browser() -> str | None:
    """Path of an installed Chromium, or None."""
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


class Chromium:
    def __init__(self, profile: Path, timeout_s: float = 60.0):
        self.profile = Path(profile)
        self.timeout_s = timeout_s
        self.errors: list[str] = []
        self._ids = itertools.count(1)

    def __enter__(self) -> "Chromium":
        import websocket

        self.profile.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen([find_browser(), *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout_s
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.__exit__()
                raise RuntimeError(f"Chromium did not start (exit code {self.proc.poll()})")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            page = next(t for t in json.load(r) if t["type"] == "page")
        # No Origin header: Chromium refuses DevTools websockets from other origins.
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=self.timeout_s,
                                              suppress_origin=True)
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        return self

    def __exit__(self, *exc) -> None:
        if getattr(self, "ws", None):
            self.ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def _event(self, msg: dict) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append("console: " + " ".join(str(a.get("value", a.get("description")))
                                                      for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            self.errors.append("exception: " + params["exceptionDetails"].get("text", ""))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.errors.append(f"log: {params['entry']['text']} {params['entry'].get('url', '')}")

    def call(self, method: str, wait_for: str | None = None, **params) -> dict:
        """Send a command; return its result (after the event ``wait_for``, if given)."""
        msg_id = next(self._ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        result, seen = None, wait_for is None
        while result is None or not seen:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                result = msg.get("result", {})
            elif "method" in msg:
                self._event(msg)
                seen = seen or msg["method"] == wait_for
        return result

    def open(self, path: Path) -> None:
        """Load a local file and wait for its load event."""
        self.call("Page.navigate", wait_for="Page.loadEventFired", url=Path(path).resolve().as_uri())

    def evaluate(self, expression: str):
        """The JSON value of a JavaScript expression in the page."""
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression[:80]}: {r['exceptionDetails'].get('text')}")
        return r["result"].get("value")

    def screenshot(self, path: Path, height: int | None = None) -> Path:
        """A PNG of the page from its top, ``height`` CSS pixels tall (the whole page if None)."""
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": min(height or size["height"], size["height"]),
                "scale": 1}
        data = self.call("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True)["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)
