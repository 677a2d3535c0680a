"""The page itself: one HTML file with its scripts, styles and data inline, so that
it opens anywhere without a network.

The template autoescapes (jinja2), so every name the page prints from Python is
text. The data goes into a ``<script type="application/json">`` element, which the
browser never runs; inside it, ``<``, ``>`` and ``&`` are written as JSON escapes,
so a C++ name such as ``Foo</script><script>...`` cannot end the element early (nor
``<!--`` start a comment). The page's script reads it with JSON.parse and puts
names into the document as text only.
"""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
from markupsafe import Markup

from ... import __version__

PACKAGE_DIR = Path(__file__).resolve().parent
ASSETS = PACKAGE_DIR / "assets"
SCRIPTS = ("d3.v5.min.js", "report.js")
STYLES = ("report.css",)
_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def script_json(data) -> Markup:
    """``data`` as JSON that can sit inside a script element whatever its strings hold."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return Markup("".join(_JSON_ESCAPES.get(c, c) for c in text) if any(c in text for c in "<>&") else text)


def inline_asset(name: str) -> Markup:
    """A script or style shipped with the package, to paste into the page; one that
    could end its element early is refused (it is ours: a broken build, not data)."""
    text = (ASSETS / name).read_text(encoding="utf-8")
    closing = "</script" if name.endswith(".js") else "</style"
    if closing in text.lower() or "<!--" in text:
        raise ValueError(f"{name} holds {closing!r} or '<!--' and cannot be inlined")
    return Markup(text)


def _environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(PACKAGE_DIR / "templates")), autoescape=True,
                              undefined=jinja2.StrictUndefined)


def render_page(data: dict, title: str) -> str:
    """The whole page for ``data`` (a report or a diff, see data.py and diff.py)."""
    template = _environment().get_template("report.html.j2")
    return template.render(title=title, version=__version__, data=script_json(data),
                           scripts=[inline_asset(name) for name in SCRIPTS],
                           styles=[inline_asset(name) for name in STYLES])
