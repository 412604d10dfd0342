"""Write stub install records (dist-info with METADATA only) for `name==version` lines into a venv's site-packages,
so that venv's pip resolves a requirement set against packages that live elsewhere (the offline GPU host's, or a
site directory staged for it) and downloads only what is missing or conflicting.

Usage: python stub_records.py LIST [LIST ...]   (run with the resolver venv's python; '#' lines are skipped)
"""
from __future__ import annotations

import re
import site
import sys
from pathlib import Path

RESOLVER_TOOLS = ("pip", "setuptools", "wheel")   # the resolver's own tools stay real


def write_stubs(lists: list[str]) -> int:
    root = Path(site.getsitepackages()[0])
    written = 0
    for listing in lists:
        for line in Path(listing).read_text().splitlines():
            if line.startswith("#") or "==" not in line:
                continue
            name, version = line.strip().split("==", 1)
            if name.lower() in RESOLVER_TOOLS:
                continue
            record = root / f"{re.sub(r'[-.]', '_', name)}-{version}.dist-info"
            record.mkdir(exist_ok=True)
            (record / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
            (record / "INSTALLER").write_text("host-stub\n")
            (record / "RECORD").write_text("")
            written += 1
    return written


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print(f"{write_stubs(sys.argv[1:])} stub records", file=sys.stderr)
