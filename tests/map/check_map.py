#!/usr/bin/env python3
"""tests/map/check_map.py - the module map (cmake/modules.cmake), enforced.

usage: check_map.py SRC_DIR MODULE_MAP_TSV [MAP_MD]

Checks, each printing every offending line:
 1. includes: every `#include "folder/file.h"` in src/<m>/ names m itself or a folder m may use;
 2. symbols: every sq_* function or object a library's archive needs (nm: undefined) is defined
    in that library or in a library of a folder it may use - the linker's view of the same rule;
 3. order: every folder m may use comes before m in SQ_MODULES (arrows point down only, so no
    two folders can use each other);
 4. readers' table (with MAP_MD, docs/internals/map.md): its table has one row per folder, top
    floor first (SQ_MODULES reversed), and each row's "may use" cell names exactly the folders of
    that folder's SQ_USES_ line ("everything": every other folder; "libc": none), so the page
    cannot drift from cmake/modules.cmake. A wrong row is printed with the cell it should have.
Exit 0 when all hold, 1 otherwise.
"""
import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"/]+)/[^"]+"')


def load_map(path):
    uses, archives, order = {}, {}, []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            name, archive, deps = (line.split("\t") + ["", ""])[:3]
            order.append(name)
            uses[name] = [d for d in deps.split(";") if d]
            if archive != "-":
                archives[name] = archive
    return uses, archives, order


def check_order(uses, order):
    bad = []
    for i, m in enumerate(order):
        for d in uses[m]:
            if d not in order:
                bad.append(f"cmake/modules.cmake: SQ_USES_{m} names {d}, which SQ_MODULES does not")
            elif order.index(d) >= i:
                bad.append(f"cmake/modules.cmake: {m} may use {d}, which does not come before it "
                           f"in SQ_MODULES (arrows point down only)")
    return bad


ROW = re.compile(r"^\|\s*`([a-z0-9_]+)/`\s*\|([^|]*)\|")


def table_rows(md):
    """The rows of the table whose header is | folder | may use | ...: (line, folder, cell)."""
    rows, inside = [], False
    with open(md, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not inside:
                inside = len(cells) >= 2 and cells[0] == "folder" and cells[1] == "may use"
                continue
            if not line.startswith("|"):
                break
            m = ROW.match(line)
            if m:
                rows.append((no, m.group(1), m.group(2).strip()))
            elif not set(line.strip()) <= set("|-: "):
                rows.append((no, None, line.strip()))
    return rows


def expected_cell(m, uses, order):
    if not uses[m]:
        return "libc"
    if set(uses[m]) == set(order) - {m}:
        return "everything"
    return ", ".join(uses[m])


def cell_folders(cell, m, order):
    if cell == "libc":
        return set()
    if cell == "everything":
        return set(order) - {m}
    return {c.strip().strip("`").rstrip("/") for c in cell.split(",") if c.strip()}


def check_table(md, uses, order):
    name = "docs/internals/map.md"
    rows = table_rows(md)
    if not rows:
        return [f"{name}: no table with the header | folder | may use |"]
    bad, seen = [], []
    for no, m, cell in rows:
        if m is None:
            bad.append(f"{name}:{no}: not a row of the form | `folder/` | may use | ...: {cell}")
            continue
        if m not in uses:
            bad.append(f"{name}:{no}: `{m}/` is no folder of cmake/modules.cmake (SQ_MODULES)")
            continue
        seen.append(m)
        if cell_folders(cell, m, order) != set(uses[m]):
            bad.append(f"{name}:{no}: `{m}/` may use \"{cell}\"; cmake/modules.cmake says: "
                       f"| `{m}/` | {expected_cell(m, uses, order)} |")
    for m in order:
        if m not in seen:
            bad.append(f"{name}: no row for `{m}/`; cmake/modules.cmake says: "
                       f"| `{m}/` | {expected_cell(m, uses, order)} |")
    want = [m for m in reversed(order) if m in seen]
    if seen != want and len(seen) == len(set(seen)):
        bad.append(f"{name}: rows out of order; top floor first (SQ_MODULES reversed): "
                   + ", ".join(f"{m}/" for m in want))
    for m in sorted({m for m in seen if seen.count(m) > 1}):
        bad.append(f"{name}: `{m}/` has more than one row")
    return bad


def check_includes(src, uses):
    uses = {m: set(u) for m, u in uses.items()}
    bad = []
    for m in sorted(os.listdir(src)):
        d = os.path.join(src, m)
        if not os.path.isdir(d):
            continue
        if m not in uses:
            bad.append(f"src/{m}/: a folder the module map (cmake/modules.cmake) does not name")
            continue
        allowed = uses[m] | {m}
        for fn in sorted(os.listdir(d)):
            if not fn.endswith((".c", ".h")):
                continue
            with open(os.path.join(d, fn), encoding="utf-8", errors="replace") as f:
                for no, line in enumerate(f, 1):
                    mm = INCLUDE.match(line)
                    if mm and mm.group(1) not in allowed:
                        bad.append(f"src/{m}/{fn}:{no}: {line.strip()}  "
                                   f"({m} may not use {mm.group(1)}/)")
    return bad


def symbols(archive):
    out = subprocess.run(["nm", "-g", "--defined-only", archive], capture_output=True,
                         text=True, check=True).stdout
    defined = {l.split()[-1] for l in out.splitlines() if len(l.split()) == 3}
    out = subprocess.run(["nm", "-g", "--undefined-only", "-A", archive], capture_output=True,
                         text=True, check=True).stdout
    undefined = []
    for l in out.splitlines():
        parts = l.split()
        if len(parts) >= 2 and parts[-1].startswith("sq_"):
            obj = parts[0].rsplit(":", 2)[-2] if parts[0].count(":") >= 2 else parts[0]
            undefined.append((obj, parts[-1]))
    return defined, undefined


def check_symbols(uses, archives):
    uses = {m: set(u) for m, u in uses.items()}
    bad = []
    defs = {m: symbols(a) for m, a in archives.items()}
    owner = {}
    for m, (defined, _) in defs.items():
        for s in defined:
            owner.setdefault(s, m)
    for m, (defined, undefined) in sorted(defs.items()):
        allowed = uses[m] | {m}
        for obj, s in undefined:
            o = owner.get(s)
            if o is None:
                bad.append(f"sq_{m}: {obj} needs {s}, which no library defines")
            elif o not in allowed:
                bad.append(f"sq_{m}: {obj} needs {s} from {o}/ ({m} may not use {o}/)")
    return bad


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    src, tsv = sys.argv[1], sys.argv[2]
    uses, archives, order = load_map(tsv)
    bad = check_includes(src, uses) + check_symbols(uses, archives) + check_order(uses, order)
    if len(sys.argv) == 4:
        bad += check_table(sys.argv[3], uses, order)
    for b in bad:
        print(b)
    n = sum(1 for m in os.listdir(src) if os.path.isdir(os.path.join(src, m)))
    print(f"module map: {n} folders, {len(archives)} libraries, "
          f"{len(bad)} violation{'s' if len(bad) != 1 else ''}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
