"""Reports of a profile, as tables for people and JSON for machines: by type, by
function (self and total), by thread, and the merged call tree (top-down or
bottom-up). Each module shapes one view; the figures come from the core."""

from .callpaths import callpaths_json, render_callpaths_text
from .functions import functions_json, render_functions_text
from .threads import render_threads_text, threads_json
from .types import render_types_text, types_json

__all__ = ["callpaths_json", "functions_json", "render_callpaths_text", "render_functions_text",
           "render_threads_text", "render_types_text", "threads_json", "types_json"]
