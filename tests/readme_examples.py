"""Keeps README.md's examples honest.

python3 tests/readme_examples.py check              the Rust and C examples in README.md
                                                    are the files that `make test` runs,
                                                    each C++ one an excerpt of one
python3 tests/readme_examples.py run-python README  runs the README's Python examples
python3 tests/readme_examples.py run-sh README      runs, from the checkout, the README's
                                                    shell block that builds the C library
                                                    (`make c-release ...`), as written
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = {
    "rust": ROOT / "core/examples/readme.rs",
    "c": ROOT / "tests/c/readme_example.c",
}
# README blocks that are excerpts of a longer program `make test` runs.
EXCERPTS = {
    "cpp": ROOT / "examples/worker.cpp",
}


def blocks(readme: str, lang: str) -> list[str]:
    return [b.strip() for b in re.findall(rf"```{lang}\n(.*?)```", readme, re.DOTALL)]


def main(argv: list[str]) -> int:
    if argv[:1] == ["check"]:
        readme = (ROOT / "README.md").read_text()
        for lang, path in FILES.items():
            if path.read_text().strip() not in blocks(readme, lang):
                print(
                    f"README.md: the {lang} example differs from {path}",
                    file=sys.stderr,
                )
                return 1
        for lang, path in EXCERPTS.items():
            for block in blocks(readme, lang):
                if block not in path.read_text():
                    print(
                        f"README.md: a {lang} example is not an excerpt of {path}",
                        file=sys.stderr,
                    )
                    return 1
        return 0
    if argv[:1] == ["run-python"] and len(argv) == 2:
        # Every Python example, in order, each in a namespace of its own.
        for n, example in enumerate(blocks(Path(argv[1]).read_text(), "python"), 1):
            # Running the README's own examples is the point of this command.
            exec(
                compile(example, f"README.md (python example {n})", "exec"),
                {"__name__": "__main__"},
            )
        return 0
    if argv[:1] == ["run-sh"] and len(argv) == 2:
        builds = [
            b for b in blocks(Path(argv[1]).read_text(), "sh") if b.startswith("make c-release")
        ]
        if len(builds) != 1:
            print(f"README.md: {len(builds)} blocks start with make c-release", file=sys.stderr)
            return 1
        print(builds[0])
        return subprocess.run(["sh", "-ec", builds[0]], cwd=ROOT).returncode
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
