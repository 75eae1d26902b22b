"""Open a page in headless Chromium (Debian's `chromium`, installed by `scripts/bootstrap.sh debs`) and read what a
person would see: a full-page PNG screenshot, the rendered text (document.body.innerText), every SVG's drawn box and
shapes, console errors and exceptions, and every URL the page requested.

It speaks the Chrome DevTools Protocol over `--remote-debugging-pipe` (the browser reads commands on fd 3 and writes
replies and events on fd 4, one JSON message each, ended by NUL), so no package beyond the browser is needed and no
port is opened. Every read has a deadline, and the browser's process group is killed at the end whatever happened.

    page = open_report(Path("report.html"), tmp_path / "report.png")
    assert not page.console_errors and page.svgs[0].shapes
"""
from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
BOOTSTRAP_HINT = "run `scripts/bootstrap.sh debs` (it installs the Debian packages of tests/debian-packages.txt)"
# Headless on a machine without network or display: no first-run, sync, extension, component or metrics traffic, a
# profile of its own in a temporary directory, /tmp instead of a possibly small /dev/shm.
FLAGS = ("--headless", "--no-sandbox", "--disable-background-networking", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
         "--disable-extensions", "--disable-component-update", "--disable-sync", "--disable-default-apps", "--disable-dev-shm-usage",
         "--metrics-recording-only", "--mute-audio", "--hide-scrollbars", "--remote-debugging-pipe")
VIEWPORT_WIDTH = 1280
MAX_SCREENSHOT_HEIGHT = 16384  # the largest texture Chromium renders in one piece
TIMEOUT_SECONDS = 60.0
EXIT_GRACE_SECONDS = 5.0
SHAPES = "rect, line, circle, ellipse, path, polyline, polygon"

SVG_INFO = """JSON.stringify(Array.from(document.querySelectorAll('svg')).map(function (svg) {
  var drawn = svg.getBBox(), shown = svg.getBoundingClientRect();
  return {label: svg.getAttribute('aria-label'), css: svg.getAttribute('class') || '',
          shapes: svg.querySelectorAll('%s').length, texts: svg.querySelectorAll('text').length,
          width: drawn.width, height: drawn.height, shown_width: shown.width, shown_height: shown.height};
}))""" % SHAPES
LOADED_URLS = "JSON.stringify(performance.getEntriesByType('resource').map(function (entry) { return entry.name; }))"


@dataclass
class SvgInfo:
    """One <svg> of the page: its aria-label and class, how many shapes and texts it holds, the box of what it draws
    (getBBox) and the size it is shown at."""
    label: Optional[str]
    css: str
    shapes: int
    texts: int
    width: float
    height: float
    shown_width: float
    shown_height: float


@dataclass
class RenderedPage:
    url: str
    title: str
    text: str
    svgs: List[SvgInfo]
    console_errors: List[str]
    requests: List[str]  # every URL requested while loading, the page itself included
    screenshot: Path
    log: List[str] = field(default_factory=list)  # every console message and browser log entry, for a failure message

    @property
    def outside_requests(self) -> List[str]:
        """URLs other than the page itself: a self-contained page has none."""
        return [url for url in self.requests if url != self.url]


class BrowserError(AssertionError):
    """The browser is missing, did not answer in time, or answered with an error."""


def require_chromium() -> str:
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        raise BrowserError("{0} not found: {1}".format(CHROMIUM, BOOTSTRAP_HINT))
    return CHROMIUM


def high_fd(fd: int) -> int:
    """A close-on-exec copy of `fd` numbered 10 or above (the original is closed), so that the child's dup2 to 3 and 4
    can never overwrite the other pipe end."""
    copy = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return copy


class Browser:
    """One headless Chromium with a DevTools pipe; a context manager that always kills its process group."""

    def __init__(self, timeout: float = TIMEOUT_SECONDS) -> None:
        self.deadline = time.monotonic() + timeout
        self.profile = tempfile.mkdtemp(prefix="chromium-")
        self.pid: Optional[int] = None
        self.commands = self.replies = -1
        self.buffer = b""
        self.events: List[dict] = []
        self.next_id = 0

    def __enter__(self) -> "Browser":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def start(self) -> None:
        binary = require_chromium()
        to_browser, self.commands = (high_fd(fd) for fd in os.pipe())
        self.replies, from_browser = (high_fd(fd) for fd in os.pipe())
        log = os.open(os.path.join(self.profile, "chromium.log"), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        env = {**os.environ, "HOME": self.profile, "XDG_CONFIG_HOME": self.profile, "XDG_CACHE_HOME": self.profile}
        argv = [binary, *FLAGS, "--user-data-dir=" + os.path.join(self.profile, "profile"), "--window-size={0},1024".format(VIEWPORT_WIDTH),
                "about:blank"]
        actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0), (os.POSIX_SPAWN_DUP2, log, 1), (os.POSIX_SPAWN_DUP2, log, 2),
                   (os.POSIX_SPAWN_DUP2, to_browser, 3), (os.POSIX_SPAWN_DUP2, from_browser, 4)]
        try:
            # a session of its own: the browser's renderer, GPU and zygote processes share its process group, killed at once
            self.pid = os.posix_spawn(binary, argv, env, file_actions=actions, setsid=True)
        finally:
            for fd in (to_browser, from_browser, log):
                os.close(fd)

    def stop(self) -> None:
        """Ask the browser to close (unless it already failed to answer in time), wait a little, then kill whatever of its
        process group is left; remove the profile."""
        try:
            if self.pid is not None and self.commands >= 0 and time.monotonic() < self.deadline:
                self.send("Browser.close")
                self.wait_exit(time.monotonic() + EXIT_GRACE_SECONDS)
        except (OSError, BrowserError):
            pass
        finally:
            self.kill()
            for fd in (self.commands, self.replies):
                if fd >= 0:
                    os.close(fd)
            self.commands = self.replies = -1
            shutil.rmtree(self.profile, ignore_errors=True)

    def kill(self) -> None:
        if self.pid is None:
            return
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.wait_exit(time.monotonic() + EXIT_GRACE_SECONDS)
        self.pid = None

    def wait_exit(self, until: float) -> bool:
        while time.monotonic() < until:
            try:
                done, _status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return True
            if done:
                return True
            time.sleep(0.05)
        return False

    def log_tail(self) -> str:
        try:
            with open(os.path.join(self.profile, "chromium.log"), encoding="utf-8", errors="replace") as handle:
                return handle.read()[-3000:]
        except OSError:
            return ""

    # ---------------------------------------------------------------------------------------- protocol
    def send(self, method: str, params: Optional[dict] = None, session: Optional[str] = None) -> int:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self.commands, data):]
        return self.next_id

    def receive(self) -> dict:
        """The next message from the browser, waiting no longer than the deadline."""
        while b"\0" not in self.buffer:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise BrowserError("Chromium did not answer within the time limit; its log:\n" + self.log_tail())
            ready, _w, _x = select.select([self.replies], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self.replies, 1 << 16)
            if not chunk:
                raise BrowserError("Chromium closed the DevTools pipe (did it start?); its log:\n" + self.log_tail())
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: Optional[dict] = None, session: Optional[str] = None) -> dict:
        """Send a command and return its result; events that arrive meanwhile are kept for `wait_event`."""
        wanted = self.send(method, params, session)
        while True:
            message = self.receive()
            if message.get("id") == wanted:
                if "error" in message:
                    raise BrowserError("{0}: {1}".format(method, message["error"]))
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_event(self, method: str, session: Optional[str] = None) -> dict:
        while True:
            for event in self.events:
                if event["method"] == method and event.get("sessionId") == session:
                    return event.get("params", {})
            message = self.receive()
            if "method" in message:
                self.events.append(message)

    def evaluate(self, expression: str, session: str):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
        if "exceptionDetails" in result:
            raise BrowserError("{0}: {1}".format(expression[:60], result["exceptionDetails"]))
        return result["result"].get("value")


# -------------------------------------------------------------------------------------------- reading a page
def console_errors(events: List[dict]) -> List[str]:
    """Uncaught exceptions, console.error/assert calls and browser log entries of level error (a failed load)."""
    errors = []
    for event in events:
        params = event.get("params", {})
        if event["method"] == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            errors.append("exception: " + str((details.get("exception") or {}).get("description") or details.get("text")))
        elif event["method"] == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            errors.append("console.{0}: {1}".format(params["type"], " ".join(str(arg.get("value", arg.get("description"))) for arg in params.get("args", []))))
        elif event["method"] == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            errors.append("log: {0} {1}".format(params["entry"].get("text"), params["entry"].get("url") or ""))
    return errors


def log_lines(events: List[dict]) -> List[str]:
    lines = []
    for event in events:
        params = event.get("params", {})
        if event["method"] == "Runtime.consoleAPICalled":
            lines.append("console.{0}: {1}".format(params.get("type"), [arg.get("value") for arg in params.get("args", [])]))
        elif event["method"] == "Log.entryAdded":
            lines.append("log {0}: {1}".format(params.get("entry", {}).get("level"), params.get("entry", {}).get("text")))
    return lines


def requested_urls(events: List[dict], session: str) -> List[str]:
    return [event["params"]["request"]["url"] for event in events
            if event["method"] == "Network.requestWillBeSent" and event.get("sessionId") == session]


def full_page_screenshot(browser: Browser, session: str, screenshot: Path) -> None:
    """The whole page, not only the first screen: the viewport is set to the content's height first."""
    metrics = browser.call("Page.getLayoutMetrics", session=session)
    size = metrics.get("cssContentSize") or metrics["contentSize"]
    height = min(int(size["height"]) + 1, MAX_SCREENSHOT_HEIGHT)
    browser.call("Emulation.setDeviceMetricsOverride", {"width": VIEWPORT_WIDTH, "height": height, "deviceScaleFactor": 1, "mobile": False},
                 session)
    image = browser.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session)
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    screenshot.write_bytes(base64.b64decode(image["data"]))


def open_page(browser: Browser, url: str, screenshot: Path) -> RenderedPage:
    target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.call(domain + ".enable", session=session)
    browser.events.clear()
    navigation = browser.call("Page.navigate", {"url": url}, session)
    if navigation.get("errorText"):
        raise BrowserError("{0}: {1}".format(url, navigation["errorText"]))
    browser.wait_event("Page.loadEventFired", session)
    full_page_screenshot(browser, session, screenshot)
    svgs = [SvgInfo(**info) for info in json.loads(browser.evaluate(SVG_INFO, session))]
    loaded = json.loads(browser.evaluate(LOADED_URLS, session))
    session_events = [event for event in browser.events if event.get("sessionId") == session]
    return RenderedPage(url=url, title=browser.evaluate("document.title", session), text=browser.evaluate("document.body.innerText", session),
                        svgs=svgs, console_errors=console_errors(session_events), requests=requested_urls(browser.events, session) + loaded,
                        screenshot=screenshot, log=log_lines(session_events))


def open_report(html_path: Path, screenshot: Path, timeout: float = TIMEOUT_SECONDS) -> RenderedPage:
    """Open the file `html_path` in a fresh headless Chromium, save a full-page PNG at `screenshot`, and return what was
    rendered. Raises BrowserError (an AssertionError, so a test fails with its message) when Chromium is missing or does
    not answer within `timeout` seconds; the browser is gone when this returns or raises."""
    url = Path(html_path).resolve().as_uri()
    with Browser(timeout) as browser:
        return open_page(browser, url, Path(screenshot))
