"""examples/console_demo.py runs unattended (``--check``): steering posted through the
console's API, as the page's composer posts it, reaches the agent's next step."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_example_runs(tmp_path: Path) -> None:
    script = ROOT / "examples" / "console_demo.py"
    done = subprocess.run(
        [sys.executable, str(script), "--check", str(tmp_path / "sessions")],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for line in [
        "turn 1 step 1 took p1: 'Plan a weekend in Lisbon.'",
        "posted from the console: web-check-1 -> next-step (post ",
        "the agent's next step took it",
        "took web-check-1: 'Keep it under 300 euros.'",
        "turn 1 ended: completed",
    ]:
        assert line in done.stdout, done.stdout
