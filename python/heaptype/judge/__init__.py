"""Judge: budget verdicts outside the budget engine itself (``heaptype.budget``, kept at
the package's top under its public name).

``check_command`` (``heaptype check``: a verdict as an exit status, for CTest and Bazel),
``budget_outputs`` (what a run of budget tests leaves: summary, Markdown, JSON, baseline)
and ``merge_command`` (``heaptype baseline/results merge`` of a run's shards, and the
``heaptype merge`` command of analyze/fleet).
"""
