# SPDX-License-Identifier: GPL-2.0
"""Reading the guests' result lines, shared by the bench report scripts.

A result line is a table tag followed by key=value words, e.g.
"W req=1048576 mode=dontcache mbps=812.3".
"""


def parse(lines, tables):
    """The lines whose first word is one of tables, as dicts of their
    key=value words plus "table"."""
    rows = []
    for line in lines:
        parts = line.split()
        if not parts or parts[0] not in tables:
            continue
        d = {"table": parts[0]}
        for kv in parts[1:]:
            if "=" in kv:
                k, v = kv.split("=", 1)
                d[k] = v
        rows.append(d)
    return rows
