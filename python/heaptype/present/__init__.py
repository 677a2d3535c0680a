"""Present: a profile shown to people and handed to other tools.

``report/`` (text and JSON reports), ``html/`` (the HTML pages), ``exports`` with
``massif`` and ``chrome_trace`` (other tools' formats), ``tables`` (the one table
printer), ``units`` (numbers as people read them) and ``console`` (what the commands
share: their error, and a profile loaded with its warnings on stderr).
"""
