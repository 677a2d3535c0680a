"""What the HTML report tests share: a headless Chromium (Debian's, driven by
playwright with its executable path set: ``playwright install`` is never used),
opening a page while recording console errors, dialogs and any network request,
and screenshots kept for CI under ``artifacts/screenshots/``.

Synthetic profiles name their code with ``_core.TableCodeNames``; ``heaptype.load``
names from the binaries on disk, so such a profile is opened with the Profile
constructor and the table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tooling import require_module, require_tool

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "artifacts" / "screenshots"


def require_playwright():
    """playwright's sync API, or a skip (a failure under HEAPTYPE_REQUIRE_TOOLS=1)."""
    return require_module("playwright.sync_api", "playwright (or '.[test]')")


@pytest.fixture(scope="module")
def browser():
    chromium = require_tool("chromium")
    sync_api = require_playwright()
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        yield launched
        launched.close()


@dataclass
class OpenPage:
    page: object
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def screenshot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / (re.sub(r"[^\w.-]+", "_", name) + ".png")
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def texts(self, selector: str) -> list[str]:
        return self.page.eval_on_selector_all(selector, "nodes => nodes.map(n => n.textContent)")

    def attributes(self, selector: str, name: str) -> list[str]:
        return self.page.eval_on_selector_all(selector, f"nodes => nodes.map(n => n.getAttribute({name!r}))")

    def table(self, table_id: str) -> dict[str, list[str]]:
        """Rows of a table by their name attribute: the cells' text."""
        rows = self.page.eval_on_selector_all(
            f"#{table_id} tbody tr",
            "rows => rows.map(r => [r.dataset.name, Array.from(r.cells).map(c => c.textContent)])")
        return {name: cells for name, cells in rows}


def open_page(browser, path: Path, *, width: int = 1280) -> OpenPage:
    """The page at ``path``, loaded, its script done (body[data-ready])."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    opened = OpenPage(page)
    page.on("console", lambda m: opened.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: opened.errors.append(str(e)))

    def on_dialog(dialog) -> None:
        opened.dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)

    def on_request(route) -> None:
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            opened.requests.append(route.request.url)
            route.abort()

    page.route("**/*", on_request)
    page.goto(path.resolve().as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=15000)
    return opened


def svg_x(opened: OpenPage, seconds: float) -> float:
    """The page's x coordinate of a time on the timeline (from the scale's ends the
    chart writes on its svg)."""
    box = opened.page.locator("#timeline svg").bounding_box()
    t0, t1, px0, px1 = (float(opened.page.get_attribute("#timeline svg", f"data-{k}"))
                        for k in ("t0", "t1", "px0", "px1"))
    return box["x"] + px0 + (seconds - t0) / (t1 - t0) * (px1 - px0)


def hover_timeline(opened: OpenPage, where: str) -> dict[str, str]:
    """The timeline's tooltip (label: value) with the mouse on the peak marker
    ("peak") or on the chart's last pixel column ("end")."""
    chart = opened.page.locator("#timeline svg").bounding_box()
    if where == "peak":
        marker = opened.page.locator("#timeline .peak-marker").bounding_box()
        x = marker["x"] + marker["width"] / 2
    else:
        x = chart["x"] + float(opened.page.get_attribute("#timeline svg", "data-px1")) - 1
    opened.page.mouse.move(x, chart["y"] + chart["height"] / 2)
    opened.page.locator("#tooltip").wait_for(state="visible")
    return dict(zip(opened.texts("#tooltip .tip-label"), opened.texts("#tooltip .tip-value")))


def synthetic_profile(path: Path, *, functions: list[str], types: list[str], program: str = "/synthetic/program",
                      addresses: bool = False):
    """A profile whose thread calls main -> each function in turn, each allocating
    one of ``types`` (10 blocks of 64 B times its position, ticks 10 apart, freed at
    the end); opened with its names from a table."""
    from heaptype import _core
    from heaptype.analyze.profile import Profile

    b = _core.ProfileBuilder(clock_tick_ns=1000, addresses=addresses)

    def address(k: int, block: int) -> int:
        return 0x100000 * k + 0x100 * block if addresses else 0

    b.program(program, [program])
    b.thread(1, 100, "main")
    names = _core.TableCodeNames()
    names.add_function(0x1000, "main")
    main = b.node(1, 0, 0x1000, 0)
    sites, time, allocations = [], 0, 0
    for k, (function, type_name) in enumerate(zip(functions, types), start=1):
        entry, call_site, alloc_site = 0x1000 * (k + 1), 0x1010 + 4 * k, 0x1000 * (k + 1) + 0x10
        names.add_function(entry, function)
        names.add_call_site(call_site, "main", 0x1000)
        names.add_call_site(alloc_site, function, entry)
        names.add_type(0xA0 + k, type_name)
        node = b.node(1, main, entry, call_site)
        site = b.site(1, 64 * k, 1, 0xA0 + k, alloc_site, node)
        for block in range(10):
            time += 10
            b.alloc(1, time, site, address(k, block))
            allocations += 1
        sites.append(site)
    for k, site in enumerate(sites, start=1):
        for block in range(10):
            time += 10
            b.free(1, time, site, address(k, block))
    b.end(allocations, allocations)
    path.write_bytes(b.finish())
    return Profile(str(path), _core.ProfileFile(str(path)), names, [])


def deep_profile(path: Path, levels: int, type_name: str):
    """One 32 B block of ``type_name`` allocated at the bottom of a path ``levels``
    frames deep through two alternating (unnamed) functions."""
    from heaptype import _core
    from heaptype.analyze.profile import Profile

    b = _core.ProfileBuilder()
    b.thread(1, 1, "main")
    node = 0
    for level in range(levels):
        node = b.node(1, node, 0x1000 + 0x100 * (level % 2), 0x1010 + 0x100 * ((level + 1) % 2))
    site = b.site(1, 32, 1, 0xA0, 0x1020, node)
    b.alloc(1, 1, site)
    path.write_bytes(b.finish())
    names = _core.TableCodeNames()
    names.add_type(0xA0, type_name)
    return Profile(str(path), _core.ProfileFile(str(path)), names, [])
