"""The questions of ``chatgate init``, one line each; secrets are read with the echo off.

``Terminal`` reads and writes through the functions it is given (``input``, ``getpass.getpass``,
``print`` by default), so a test may script it; the setup itself is driven through a real
pseudo-terminal in the tests.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass
class Terminal:
    read: Callable[[str], str] = input
    read_secret: Callable[[str], str] = field(default=getpass.getpass)
    write: Callable[[str], None] = print

    def say(self, text: str = "") -> None:
        self.write(text)

    def ask(self, question: str, default: str | None = None) -> str:
        """An answer; Enter gives ``default`` (shown in brackets) when there is one."""
        while True:
            shown = f" [{default}]" if default else ""
            answer = self.read(f"{question}{shown}: ").strip()
            if answer or default is not None:
                return answer or (default or "")
            self.say("  (an answer is needed; Ctrl-C stops the setup and writes nothing)")

    def secret(self, question: str) -> str:
        """A secret, typed or pasted with the echo off; never empty."""
        while True:
            answer = self.read_secret(f"{question} (hidden as you type): ").strip()
            if answer:
                return answer
            self.say("  (an answer is needed; Ctrl-C stops the setup and writes nothing)")

    def yes(self, question: str, default: bool) -> bool:
        hint = "Y/n" if default else "y/N"
        while True:
            answer = self.read(f"{question} [{hint}]: ").strip().lower()
            if not answer:
                return default
            if answer in ("y", "yes", "n", "no"):
                return answer.startswith("y")
            self.say("  (y or n)")

    def choose(self, question: str, options: Sequence[str], default: int = 1) -> int:
        """The 1-based number of one of ``options``."""
        for number, option in enumerate(options, 1):
            self.say(f"  {number}) {option}")
        while True:
            answer = self.ask(question, str(default))
            if answer.isdigit() and 1 <= int(answer) <= len(options):
                return int(answer)
            self.say(f"  (a number from 1 to {len(options)})")

    def choose_many(self, question: str, options: Sequence[str]) -> list[int]:
        """The 1-based numbers of any of ``options`` (comma-separated; Enter: none)."""
        for number, option in enumerate(options, 1):
            self.say(f"  {number}) {option}")
        while True:
            answer = self.read(f"{question}: ").replace(" ", "")
            picked = [part for part in answer.split(",") if part]
            if all(p.isdigit() and 1 <= int(p) <= len(options) for p in picked):
                return list(dict.fromkeys(int(p) for p in picked))
            self.say(f"  (numbers from 1 to {len(options)}, separated by commas, or Enter for none)")
