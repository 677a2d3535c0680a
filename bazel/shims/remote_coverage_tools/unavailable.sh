#!/bin/sh
echo "coverage tools are not available offline: this is HeapType's remote_coverage_tools stand-in" >&2
exit 1
