#!/usr/bin/env python3
"""Render the leak checker's verdict matrix as the rst table of the docs.

The data is Lib/test/tracemalloc_verdict_table.py (issue 29, item 3.2);
Doc/library/tracemalloc.rst shows it between the comments
``.. verdict-table-begin`` and ``.. verdict-table-end``, and
Lib/test/test_tracemalloc_verdicts.py checks that the doc's table is this
script's rendering of the data.

    Tools/fork/verdict_table.py            print the table
    Tools/fork/verdict_table.py --update   rewrite it in the doc
"""

import os
import sys

BEGIN = ".. verdict-table-begin"
END = ".. verdict-table-end"
HEADER = ("Entry point", "Target", "Target does", "Verdict", "Exit",
          "Known wrong")


def render(cells):
    """The rst list-table of *cells* (rows of the verdict table)."""
    lines = [".. list-table::", "   :header-rows: 1",
             "   :widths: 14 18 10 10 6 26", ""]
    rows = [HEADER]
    for entry, kind, outcome, verdict, status, known in cells:
        if known is None:
            wrong = ""
        else:
            item, wrong_verdict, wrong_status = known
            wrong = f"item {item}: today {wrong_verdict}, exit {wrong_status}"
        rows.append((f"``{entry}``", kind, outcome, f"**{verdict}**",
                     status, wrong))
    for row in rows:
        first, *rest = row
        lines.append(f"   * - {first}")
        for value in rest:
            lines.append(f"     - {value}" if value else "     -")
    return "\n".join(lines) + "\n"


def extract(text):
    """The table between the markers of the doc *text*."""
    start = text.index(BEGIN) + len(BEGIN)
    end = text.index(END)
    return text[start:end].strip("\n") + "\n"


def main(argv):
    repo = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    sys.path.insert(0, os.path.join(repo, "Lib"))
    from test import tracemalloc_verdict_table as table
    rendered = render(table.CELLS)
    if argv[1:] == ["--update"]:
        doc = os.path.join(repo, "Doc", "library", "tracemalloc.rst")
        with open(doc, encoding="utf-8") as file:
            text = file.read()
        start = text.index(BEGIN) + len(BEGIN)
        end = text.index(END)
        text = text[:start] + "\n\n" + rendered + "\n" + text[end:]
        with open(doc, "w", encoding="utf-8") as file:
            file.write(text)
    elif argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    else:
        sys.stdout.write(rendered)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
