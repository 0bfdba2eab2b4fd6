"""Every ```python block of README.md runs, as written, on the CPU backend, so that the README cannot rot.

Each block is a script of its own, run by a fresh Python process (``__name__ == "__main__"``, its own worker
processes and Genesis init) in a directory of its own, with CUDA hidden (``CUDA_VISIBLE_DEVICES=""``, so the
default backend is ``"cpu"`` too) and a time limit. The script starts with as many blank lines as come before the
block in README.md, so the line numbers of a traceback are README.md's. Two blocks run at a time: a block is mostly
one busy process importing and building, and on 2 cores the five blocks of the time took about 60 s against 72 s one
by one.

HTML comments right before a block (only blank lines or other such comments between) say how it is run; both kinds
are visible to whoever edits the block and neither is applied anywhere else:

- ``<!-- readme-test: skip (why) -->``: not run (the reason shows in pytest's skip summary). Skipped blocks are
  counted and the count is asserted, so a block cannot drop out unnoticed.
- ``<!-- readme-test: replace `OLD` with `NEW` (why) -->``: the literal ``OLD`` (one line) must occur exactly once
  in the block and is replaced by ``NEW`` before the run: to train a few steps instead of a full run on CPU, or to
  run a GPU-sized block small (``replace `num_envs=4096` with `num_envs=8` (CPU)``).

A marker that precedes anything but a ```python block, an unknown marker or a replacement that does not match once
fails ``test_readme_blocks_found``, as does a number of blocks other than ``EXPECTED_BLOCKS``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
EXPECTED_BLOCKS = 6
"""```python blocks in README.md: change it with the README (a README with none must fail)."""
EXPECTED_SKIPPED = 0
"""Of them, those marked ``readme-test: skip``."""
TIMEOUT = 600.0
"""Seconds per block: a cold kernel cache costs 1-2 minutes of compilation (a bound, not a measure)."""
PARALLEL = 2
STDERR_TAIL = 6000

PYTHON_INFO_STRINGS = {"python", "py", "python3"}
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^\s`]*)")
MARKER = re.compile(r"^\s*<!--\s*readme-test:\s*(?P<body>.*?)\s*-->\s*$")
SKIP = re.compile(r"^skip \((?P<reason>.+)\)$")
REPLACE = re.compile(r"^replace `(?P<old>[^`]+)` with `(?P<new>[^`]*)` \((?P<reason>.+)\)$")


class ReadmeMarkerError(ValueError):
    """A readme-test marker that is malformed, misplaced or does not match its block."""


@dataclasses.dataclass(frozen=True)
class Block:
    line: int
    """README.md line of the block's first code line."""
    code: str
    """The code as it runs: markers' replacements applied."""
    skip: str | None = None
    replacements: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        first = next((line.strip() for line in self.code.splitlines() if line.strip()), "")
        return f"README.md line {self.line} ({first!r})"


def parse_blocks(text: str) -> list[Block]:
    """The ```python blocks of a Markdown text with their readme-test markers applied; raises ReadmeMarkerError."""
    lines = text.splitlines()
    blocks: list[Block] = []
    pending: list[tuple[int, str]] = []  # (line number, marker body) waiting for their block
    index = 0
    while index < len(lines):
        number, line = index + 1, lines[index]
        marker, fence = MARKER.match(line), FENCE.match(line)
        if marker:
            pending.append((number, marker["body"]))
            index += 1
            continue
        if not line.strip():
            index += 1
            continue
        if not fence:
            if pending:
                raise ReadmeMarkerError(f"marker on line {pending[0][0]} is not right before a ```python block")
            index += 1
            continue
        # a fenced block: find its closing fence (same character, at least as long, nothing after it)
        indent, opening, info = len(fence["indent"]), fence["fence"], fence["info"].lower()
        closing = re.compile(rf"^ *{re.escape(opening[0])}{{{len(opening)},}}\s*$")
        end = next((i for i in range(index + 1, len(lines)) if closing.match(lines[i])), len(lines))
        body = [line[indent:] if line.startswith(" " * indent) else line.lstrip(" ") for line in lines[index + 1 : end]]
        if info in PYTHON_INFO_STRINGS:
            blocks.append(apply_markers(Block(number + 1, "\n".join(body) + "\n"), pending))
        elif pending:
            raise ReadmeMarkerError(f"marker on line {pending[0][0]} is before a ```{info} block, not ```python")
        pending = []
        index = end + 1
    if pending:
        raise ReadmeMarkerError(f"marker on line {pending[0][0]} is not followed by a ```python block")
    return blocks


def apply_markers(block: Block, markers: list[tuple[int, str]]) -> Block:
    for number, body in markers:
        if skip := SKIP.match(body):
            block = dataclasses.replace(block, skip=skip["reason"])
        elif replace := REPLACE.match(body):
            old, new = replace["old"], replace["new"]
            found = block.code.count(old)
            if found != 1:
                raise ReadmeMarkerError(
                    f"marker on line {number}: `{old}` occurs {found} times in {block.name}, expected exactly once"
                )
            block = dataclasses.replace(
                block, code=block.code.replace(old, new), replacements=(*block.replacements, (old, new))
            )
        else:
            raise ReadmeMarkerError(
                f"marker on line {number}: {body!r} is neither `skip (why)` nor `replace `OLD` with `NEW` (why)`"
            )
    return block


try:
    BLOCKS, PARSE_ERROR = parse_blocks(README.read_text(encoding="utf-8")), None
except ReadmeMarkerError as error:  # reported by test_readme_blocks_found, not as a collection error
    BLOCKS, PARSE_ERROR = [], error


def test_readme_blocks_found():
    assert PARSE_ERROR is None, f"README.md: {PARSE_ERROR}"
    names = "\n".join(f"  {block.name}" + (f": skipped ({block.skip})" if block.skip else "") for block in BLOCKS)
    assert len(BLOCKS) == EXPECTED_BLOCKS, (
        f"README.md has {len(BLOCKS)} ```python blocks, this test expects {EXPECTED_BLOCKS}:\n{names}"
    )
    skipped = sum(block.skip is not None for block in BLOCKS)
    assert skipped == EXPECTED_SKIPPED, (
        f"README.md has {skipped} blocks marked readme-test: skip, this test expects {EXPECTED_SKIPPED}:\n{names}"
    )


@dataclasses.dataclass
class Outcome:
    returncode: int | None  # None: killed at the time limit
    seconds: float
    stdout: str
    stderr: str


class BlockRunner:
    """Runs the blocks ``PARALLEL`` at a time from the start, in README order; ``result(block)`` waits for one."""

    def __init__(self, blocks: list[Block], directory: Path) -> None:
        self.directory = directory
        self.processes: list[subprocess.Popen] = []
        self.lock = threading.Lock()
        self.closed = False
        self.executor = ThreadPoolExecutor(PARALLEL)
        self.futures: dict[int, Future[Outcome]] = {
            block.line: self.executor.submit(self.run, block) for block in blocks if block.skip is None
        }

    def run(self, block: Block) -> Outcome:
        workdir = self.directory / f"line{block.line}"
        workdir.mkdir()
        script = workdir / "README_md.py"
        script.write_text("\n" * (block.line - 1) + block.code, encoding="utf-8")  # README.md's line numbers
        # SB3_LOGDIR: SB3's learn() otherwise makes a directory in /tmp for its logs
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "SB3_LOGDIR": str(workdir / "sb3-logs")}
        start = time.monotonic()
        with self.lock:  # close() kills every process started before it and lets none start after it
            if self.closed:
                return Outcome(None, 0.0, "", "not run: the runner was closed")
            # A session of its own, so that a block is killed with the worker processes it started.
            process = subprocess.Popen(
                [sys.executable, script.name], cwd=workdir, env=env, text=True,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            )  # fmt: skip
            self.processes.append(process)
        try:
            stdout, stderr = process.communicate(timeout=TIMEOUT)
            returncode: int | None = process.returncode
        except subprocess.TimeoutExpired:
            self.kill(process)
            stdout, stderr = process.communicate()
            returncode = None
        return Outcome(returncode, time.monotonic() - start, stdout, stderr)

    @staticmethod
    def kill(process: subprocess.Popen) -> None:
        with contextlib.suppress(ProcessLookupError):  # already gone
            os.killpg(process.pid, signal.SIGKILL)

    def result(self, block: Block) -> Outcome:
        return self.futures[block.line].result()

    def close(self) -> None:
        """Stops what has not run (``-x`` after a failure): pending blocks never start, running ones are killed."""
        with self.lock:
            self.closed = True
            for process in self.processes:
                if process.poll() is None:
                    self.kill(process)
        self.executor.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BlockRunner]:
    runner = BlockRunner(BLOCKS, tmp_path_factory.mktemp("readme"))
    yield runner
    runner.close()


@pytest.mark.parametrize("block", BLOCKS, ids=[f"line{block.line}" for block in BLOCKS])
def test_readme_block(block: Block, runner: BlockRunner):
    if block.skip is not None:
        pytest.skip(f"{block.name}: marked readme-test: skip ({block.skip})")
    outcome = runner.result(block)
    replaced = "".join(f"\n  with `{old}` replaced by `{new}`" for old, new in block.replacements)
    status = f"exited with code {outcome.returncode}" if outcome.returncode is not None else "ran past its limit"
    if outcome.returncode != 0:
        pytest.fail(
            f"{block.name}{replaced}\n{status} after {outcome.seconds:.0f} s (traceback lines are README.md's); "
            f"stdout ends:\n{outcome.stdout[-2000:]}\nstderr ends:\n{outcome.stderr[-STDERR_TAIL:]}",
            pytrace=False,
        )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<!-- readme-test: skip (x) -->\nprose\n```python\npass\n```\n", "marker on line 1 is not right before"),
        ("<!-- readme-test: skip (x) -->\n```bash\nls\n```\n", "marker on line 1 is before a ```bash block"),
        ("```python\npass\n```\n<!-- readme-test: skip (x) -->\n", "marker on line 4 is not followed by"),
        ("<!-- readme-test: skip -->\n```python\npass\n```\n", "'skip' is neither"),
        ("<!-- readme-test: replace `x` with `b` (x) -->\n```python\npass\n```\n", "`x` occurs 0 times"),
        ("<!-- readme-test: replace `s` with `b` (x) -->\n```python\npass\n```\n", "`s` occurs 2 times"),
    ],
    ids=["prose-between", "before-bash", "at-the-end", "skip-without-reason", "replace-no-match", "replace-twice"],
)
def test_bad_markers_are_refused(text: str, message: str):
    with pytest.raises(ReadmeMarkerError, match=re.escape(message)):
        parse_blocks(text)


def test_markers_apply_to_the_next_python_block_only():
    text = (
        "# t\n\n```bash\npython x.py\n```\n\n"
        "<!-- readme-test: replace `steps=100` with `steps=2` (short) -->\n\n"
        "```python\nrun(steps=100)\n```\n"
        "<!-- readme-test: skip (a fragment) -->\n```python\nfragment(...)\n```\n"
        "- in a list:\n\n  ```py\n  if x:\n      y()\n  ```\n"
    )
    assert parse_blocks(text) == [
        Block(10, "run(steps=2)\n", replacements=(("steps=100", "steps=2"),)),
        Block(14, "fragment(...)\n", skip="a fragment"),
        Block(19, "if x:\n    y()\n"),
    ]
