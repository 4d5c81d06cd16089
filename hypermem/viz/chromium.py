"""A small headless-Chromium driver over the DevTools protocol (no extra packages): open
a page, evaluate JavaScript, click, press keys, take screenshots.  Used to check and
benchmark the inspector page and to take its screenshots.

The browser is started with ``--remote-debugging-pipe``: it reads protocol messages
(JSON, each ended by a NUL byte) on its file descriptor 3 and writes answers and events on
descriptor 4.

>>> with Chromium() as browser:                                  # doctest: +SKIP
...     browser.open(Path("page.html").resolve().as_uri())
...     browser.evaluate("document.title")
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["Chromium", "find_chromium"]

_KEYS = {"ArrowUp": 38, "ArrowDown": 40, "ArrowLeft": 37, "ArrowRight": 39, "Home": 36, "Enter": 13}


def find_chromium() -> str | None:
    """The path of a Chromium (or Chrome) executable, or ``None``."""
    return next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)),
                None)


class Chromium:
    """One headless browser with one page (a context manager)."""

    def __init__(self, executable: str | None = None, width: int = 1280, height: int = 1200, timeout: float = 60.0):
        exe = executable or find_chromium()
        if exe is None:
            raise RuntimeError("Chromium is not installed (Debian: apt-get install chromium)")
        self.timeout = float(timeout)
        self._profile = tempfile.TemporaryDirectory(prefix="hypermem-chromium-")
        cmd_r, cmd_w = os.pipe()   # we write commands, the browser reads them on fd 3
        out_r, out_w = os.pipe()   # the browser writes on fd 4, we read

        def fds():  # in the child: the pipe ends as descriptors 3 and 4 (via high copies: they may be 3 or 4)
            a, b = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10), fcntl.fcntl(out_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self._proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--remote-debugging-pipe",
             f"--user-data-dir={self._profile.name}", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=fds, close_fds=False)
        os.close(cmd_r)
        os.close(out_w)
        self._w, self._r = cmd_w, out_r
        self._buf = b""
        self._next = 0
        self._events: list[dict] = []
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        self.call("Page.enable")
        self.call("Runtime.enable")

    # ------------------------------------------------------------ protocol
    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._r], [], [], left)[0]:
                raise TimeoutError("no answer from Chromium in time")
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def _call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self._next:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            if "method" in m:
                self._events.append(m)

    def call(self, method: str, params: dict | None = None) -> dict:
        """One protocol command on the page's session; returns its result."""
        return self._call(method, params, self._session)

    def wait_event(self, method: str) -> dict:
        """Wait for (and consume) the next event ``method`` of the page."""
        deadline = time.monotonic() + self.timeout
        while True:
            for k, e in enumerate(self._events):
                if e["method"] == method:
                    return self._events.pop(k)
            m = self._read_message(deadline)
            if "method" in m:
                self._events.append(m)

    # ------------------------------------------------------------ page
    def open(self, url: str, ready: str = "document.body && document.body.getAttribute('data-ready') === '1'") -> float:
        """Navigate to ``url`` and wait for its load event and the ``ready`` expression;
        returns the wall seconds that took."""
        # From a blank page, so that a new fragment of the same file loads it afresh.
        self._events = [e for e in self._events if e["method"] != "Page.loadEventFired"]
        self.call("Page.navigate", {"url": "about:blank"})
        self.wait_event("Page.loadEventFired")
        t0 = time.monotonic()
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")
        self.wait_for(ready)
        return time.monotonic() - t0

    def wait_for(self, expression: str, timeout: float | None = None) -> None:
        """Poll ``expression`` until it is truthy."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not self.evaluate(expression):
            if time.monotonic() > deadline:
                raise TimeoutError(f"still false: {expression}")
            time.sleep(0.02)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (promises are awaited)."""
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise RuntimeError(f"JavaScript error: {d.get('exception', {}).get('description') or d.get('text')}")
        return r["result"].get("value")

    def click(self, x: float, y: float) -> None:
        """A left click at page (CSS pixel) coordinates."""
        base = {"x": float(x), "y": float(y), "button": "left", "clickCount": 1}
        self.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": float(x), "y": float(y)})
        self.call("Input.dispatchMouseEvent", {"type": "mousePressed", **base})
        self.call("Input.dispatchMouseEvent", {"type": "mouseReleased", **base})

    def drag(self, x0: float, y0: float, x1: float, y1: float, steps: int = 8) -> None:
        """Press at ``(x0, y0)``, move in ``steps`` to ``(x1, y1)`` and release."""
        self.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x0, "y": y0})
        self.call("Input.dispatchMouseEvent", {"type": "mousePressed", "x": x0, "y": y0, "button": "left",
                                               "clickCount": 1})
        for k in range(1, steps + 1):
            x, y = x0 + (x1 - x0) * k / steps, y0 + (y1 - y0) * k / steps
            self.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y, "button": "left",
                                                   "buttons": 1})
        self.call("Input.dispatchMouseEvent", {"type": "mouseReleased", "x": x1, "y": y1, "button": "left",
                                               "clickCount": 1})

    def key(self, key: str) -> None:
        """Press and release a key (``"ArrowUp"``, ``"Home"``, a character, ...)."""
        code = _KEYS.get(key, ord(key.upper()) if len(key) == 1 else 0)
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", {"type": kind, "key": key, "windowsVirtualKeyCode": code,
                                                 "nativeVirtualKeyCode": code})

    def screenshot(self, path: str | os.PathLike, clip: dict | None = None) -> Path:
        """A PNG of the page (or of ``clip``: ``{"x", "y", "width", "height"}`` in CSS pixels)."""
        params: dict[str, Any] = {"format": "png"}
        if clip is not None:
            params["clip"] = {**clip, "scale": 1}
        data = base64.b64decode(self.call("Page.captureScreenshot", params)["data"])
        out = Path(path)
        out.write_bytes(data)
        return out

    # ------------------------------------------------------------ lifetime
    def close(self) -> None:
        """End the browser."""
        if self._proc.poll() is None:
            try:
                self._call("Browser.close")
            except (RuntimeError, TimeoutError, OSError):
                pass
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for fd in (self._w, self._r):
            try:
                os.close(fd)
            except OSError:
                pass
        self._profile.cleanup()

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
