#!/usr/bin/env python3
"""tests/map/check_map.py - the module map (cmake/modules.cmake), enforced.

usage: check_map.py SRC_DIR MODULE_MAP_TSV

Two checks, each printing every offending line:
 1. includes: every `#include "folder/file.h"` in src/<m>/ names m itself or a folder m may use;
 2. symbols: every sq_* function or object a library's archive needs (nm: undefined) is defined
    in that library or in a library of a folder it may use - the linker's view of the same rule.
Exit 0 when both hold, 1 otherwise.
"""
import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"/]+)/[^"]+"')


def load_map(path):
    uses, archives = {}, {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            name, archive, deps = (line.split("\t") + ["", ""])[:3]
            uses[name] = set(deps.split(";")) - {""}
            if archive != "-":
                archives[name] = archive
    return uses, archives


def check_includes(src, uses):
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
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    src, tsv = sys.argv[1], sys.argv[2]
    uses, archives = load_map(tsv)
    bad = check_includes(src, uses) + check_symbols(uses, archives)
    for b in bad:
        print(b)
    n = sum(1 for m in os.listdir(src) if os.path.isdir(os.path.join(src, m)))
    print(f"module map: {n} folders, {len(archives)} libraries, "
          f"{len(bad)} violation{'s' if len(bad) != 1 else ''}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
