"""Reports of a profile, as tables for people and JSON for machines: by type, by
function (self and total), by thread, the merged call tree (top-down or bottom-up),
the timeline, leaks, and the difference of two profiles. Each module shapes one
view; the figures come from the core."""

from .callpaths import callpaths_json, callpaths_json_text, render_callpaths_text
from .diff import diff_json, diff_rows, over_threshold, render_diff_text
from .functions import functions_json, render_functions_text
from .leaks import leaks_json, render_leaks_text
from .memory import memory_json, render_memory_text
from .threads import render_threads_text, threads_json
from .timeline import render_timeline_text, timeline_json, timelines_json
from .types import render_types_text, types_json

__all__ = ["callpaths_json", "callpaths_json_text", "diff_json", "diff_rows", "functions_json", "leaks_json",
           "memory_json", "render_memory_text",
           "over_threshold", "render_callpaths_text", "render_diff_text", "render_functions_text",
           "render_leaks_text", "render_threads_text", "render_timeline_text", "render_types_text",
           "threads_json", "timeline_json", "timelines_json", "types_json"]
