#!/usr/bin/env python3
"""Size limits of the structure rules: no function over 80 lines in the library crates, no file
over 600 lines in phalanx-proto. Counts from a `fn` line to its closing brace (doc comments
and attributes excluded). Prints every offender; exits 1 if there is any."""
import pathlib
import re
import sys

FN_LINES_MAX = 80
PROTO_FILE_LINES_MAX = 600
CRATES = ["phalanx-wheel", "phalanx-proto", "phalanx", "phalanx-sim", "phalanx-udp", "phalanx-relay"]
FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+(\w+)")


def functions(path):
    lines = path.read_text().splitlines()
    for start, line in enumerate(lines):
        match = FN.match(line)
        if not match:
            continue
        depth, opened = 0, False
        for end in range(start, len(lines)):
            text = re.sub(r'"(\\.|[^"\\])*"', '""', lines[end].split("//")[0])
            text = re.sub(r"'(\\.|[^'\\])'", "''", text)
            depth += text.count("{") - text.count("}")
            opened = opened or "{" in text
            if opened and depth <= 0:
                break
            if not opened and text.rstrip().endswith(";"):
                break
        if opened:
            yield match.group(6), start + 1, end - start + 1


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    failures = []
    for crate in CRATES:
        for path in sorted((root / "crates" / crate).rglob("*.rs")):
            rel = path.relative_to(root)
            for name, line, length in functions(path):
                if length > FN_LINES_MAX:
                    failures.append(f"{rel}:{line}: fn {name} is {length} lines (max {FN_LINES_MAX})")
            if crate == "phalanx-proto":
                count = len(path.read_text().splitlines())
                if count > PROTO_FILE_LINES_MAX:
                    failures.append(f"{rel}: {count} lines (max {PROTO_FILE_LINES_MAX})")
    for failure in failures:
        print(failure)
    print(f"sizes: {len(failures)} over the limits")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
