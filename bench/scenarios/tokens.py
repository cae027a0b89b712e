"""tokens: what a long conversation with big tool results sends to the model (a baseline
for context management; no goal)."""

from __future__ import annotations

from bench.common import running_stack
from bench.report import Figure
from tests.fakes.llm_server import Call, Reply

NAME = "tokens"
HOW = ("One DM conversation of 100 turns (quick: 10); in every turn the model calls read_file on a 20 KB file "
       "in the user's workspace (written before the bot starts), then answers. Prompt tokens are what the fake "
       "LLM reports as usage: the JSON of the request's messages / 4 (tool schemas not counted).")
CHAT = 9000
FILE_BYTES = 20 * 1024


def notes() -> str:
    """FILE_BYTES of plain text in numbered lines."""
    lines = (f"Notes line {n:04d}: the quick brown fox jumps over the lazy dog, again.\n" for n in range(10_000))
    text = ""
    while len(text) < FILE_BYTES:
        text += next(lines)
    return text[:FILE_BYTES]


async def run(quick: bool) -> list[Figure]:
    turns = 10 if quick else 100
    async with running_stack() as stack:
        workspace = stack.workspaces / f"telegram-{CHAT}"
        workspace.mkdir(parents=True)
        (workspace / "notes.txt").write_text(notes())
        await stack.start_bot()
        for n in range(turns):
            await stack.llm.script(Reply.tool_calls([Call("read_file", {"path": "notes.txt"})]),
                                   Reply.text(f"The notes are unchanged (turn {n})."))
            await stack.ask(CHAT, f"Turn {n}: please read notes.txt again.", timeout=30)
        prompts = [r["prompt_tokens"] for r in stack.llm.reports]
    # each turn is two requests: the one that calls the tool, and the one that reads its result
    read = sum(after - before > FILE_BYTES // 8 for before, after in zip(prompts[::2], prompts[1::2]))
    figures = [
        Figure(NAME, f"prompt tokens sent, all {turns} turns", sum(prompts)),
        Figure(NAME, "prompt tokens, last turn (2 requests)", sum(prompts[-2:])),
        Figure(NAME, "prompt tokens, largest request", max(prompts)),
        Figure(NAME, "model requests", len(prompts)),
    ]
    if read != turns:
        figures.append(Figure(NAME, "turns whose tool result did not reach the model", turns - read))
    return figures
