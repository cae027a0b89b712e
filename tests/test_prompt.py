"""The system prompt: sections, order, modes, and what never enters a group."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from bot.agent import prompt as prompt_mod
from bot.agent.prompt import (
    PERSONA_REMINDER,
    PromptInputs,
    build_prompt_parts,
    context_file_names,
    first_sentence,
)
from bot.messages import ChatType
from bot.providers.base import ToolSpec
from bot.workspace import ContextFile

FILES = tuple(
    ContextFile(name, f"<<{name} body>>")
    for name in ("AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md", "TOOLS.md", "BOOTSTRAP.md", "MEMORY.md")
)
TOOLS = (
    ToolSpec("read_file", "Read a file from the workspace. Paths are relative.", {"type": "object"}),
    ToolSpec("exec", "Run a shell command!\nIt times out.", {"type": "object"}),
)
NOW = datetime(2025, 1, 7, 14, 32, 5, tzinfo=UTC)

FULL_ORDER = [
    "## Identity", "## First run", "## Persona", "## Tools", "## Safety", "## Workspace\n",
    "## Owner", "## Formatting", "## Workspace files", "## Extra instructions", PERSONA_REMINDER,
    "## Runtime", "## Current time",
]
MINIMAL_ORDER = [
    "## Identity", "## Tools", "## Safety", "## Workspace\n", "## Workspace files", "## Runtime", "## Current time",
]


def inputs(**changes: object) -> PromptInputs:
    base = PromptInputs(
        mode="full",
        agent_id="main",
        platform="telegram",
        chat_type=ChatType.DM,
        tools=TOOLS,
        workspace=Path("/srv/ws/telegram-42"),
        context_files=FILES,
        owner_ids=("telegram:42",),
        now=NOW,
        model="gpt-4o-mini",
        provider="openai",
        session_key="agent:main:telegram:dm:42",
        extra_instructions="Always answer in haiku.",
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def build_system_prompt(p: PromptInputs) -> str:
    """The whole prompt of one request, as a model reads it: the stable part, then the volatile."""
    return "\n\n".join(build_prompt_parts(p))


def headers(text: str) -> list[str]:
    """Section headers at the top level (the file blocks' own headings are inside <file>)."""
    found = []
    depth = 0
    for line in text.splitlines():
        depth += line.startswith("<file ") - (line == "</file>")
        if depth == 0 and line.startswith("## "):
            found.append(line)
    return found


def test_full_mode_has_every_section_in_order() -> None:
    text = build_system_prompt(inputs())
    positions = [text.index(h) for h in FULL_ORDER]
    assert positions == sorted(positions)
    assert headers(text) == [h.strip() for h in FULL_ORDER if h != PERSONA_REMINDER]
    assert text.rstrip().endswith("2025-01-07 14:32 UTC")  # volatile last, for prompt caching


def test_stable_part_first_volatile_last() -> None:
    stable, volatile = prompt_mod.build_prompt_parts(inputs())
    later = prompt_mod.build_prompt_parts(inputs(now=NOW + timedelta(hours=3)))
    assert later[0] == stable and later[1] != volatile  # only the volatile part changes
    assert volatile.startswith("## Runtime") and "## Current time" in volatile
    assert "## Current time" not in stable and "## Runtime" not in stable
    assert build_system_prompt(inputs()) == stable + "\n\n" + volatile


def test_minimal_mode_has_only_its_sections() -> None:
    text = build_system_prompt(inputs(mode="minimal"))
    assert headers(text) == [h.strip() for h in MINIMAL_ORDER]
    for kept in ("<<AGENTS.md body>>", "<<TOOLS.md body>>"):
        assert kept in text
    for dropped in ("SOUL.md body", "IDENTITY.md body", "USER.md body", "MEMORY.md body",
                    "BOOTSTRAP.md body", "telegram:42", "haiku", PERSONA_REMINDER):
        assert dropped not in text


def test_identity_names_platform_and_chat_type() -> None:
    assert "on Telegram, in a direct" in build_system_prompt(inputs())
    assert "on Discord, in a group chat" in build_system_prompt(inputs(platform="discord", chat_type=ChatType.GROUP))


def test_persona_comes_early_and_context_files_later() -> None:
    text = build_system_prompt(inputs())
    assert text.index("<<SOUL.md body>>") < text.index("## Tools")
    assert text.index("<<IDENTITY.md body>>") < text.index("## Tools")
    for name in ("AGENTS.md", "USER.md", "TOOLS.md", "MEMORY.md"):
        assert text.index("## Workspace files") < text.index(f"<<{name} body>>")
        assert f'<file name="{name}">' in text
    assert text.count("<<SOUL.md body>>") == 1  # persona files are not repeated as context


def test_memory_only_in_dms() -> None:
    assert "<<MEMORY.md body>>" in build_system_prompt(inputs())
    group = build_system_prompt(inputs(chat_type=ChatType.GROUP, session_key="agent:main:telegram:group:-1"))
    assert "<<MEMORY.md body>>" not in group
    assert "<<USER.md body>>" in group


def test_plain_string_chat_type_and_lists_are_normalised() -> None:
    """A caller passing ``"group"`` (ChatType's value) still gets the group rules."""
    p = inputs(chat_type="group", owner_ids=["telegram:42"], tools=list(TOOLS), context_files=list(FILES))
    assert p.chat_type is ChatType.GROUP and isinstance(p.owner_ids, tuple)
    text = build_system_prompt(p)
    assert "<<MEMORY.md body>>" not in text and "answer exactly NO_REPLY" in text and "chat=group" in text
    with pytest.raises(ValueError):
        inputs(chat_type="channel")
    with pytest.raises(ValueError):
        inputs(mode="tiny")


def test_context_file_names_per_mode_and_chat() -> None:
    assert "MEMORY.md" in context_file_names("full", ChatType.DM)
    assert "MEMORY.md" not in context_file_names("full", "group")
    assert "USER.md" in context_file_names("full", ChatType.GROUP)
    assert context_file_names("minimal", ChatType.DM) == ("AGENTS.md", "TOOLS.md")


def test_formatting_hints_per_platform_and_chat_type() -> None:
    def fmt(**kw: object) -> str:
        text = build_system_prompt(inputs(**kw))
        return text[text.index("## Formatting") : text.index("## Workspace files")]

    telegram, discord = fmt(), fmt(platform="discord")
    slack, console = fmt(platform="slack"), fmt(platform="console")
    assert "No tables" in telegram and "Telegram" in telegram
    assert "2000 characters" in discord and "60" in discord
    assert "mrkdwn" in slack and "tables" in slack  # from the Slack spec: tables become code blocks
    assert "terminal" in console
    assert len({telegram, discord, slack, console}) == 4
    group = fmt(chat_type=ChatType.GROUP)
    assert "answer exactly NO_REPLY and nothing else" in group and "Be brief" in group
    assert "never answer NO_REPLY unless" in telegram
    assert "answer exactly NO_REPLY" not in telegram


def test_bootstrap_notice_only_when_bootstrap_file_present() -> None:
    with_it = build_system_prompt(inputs())
    assert "[MANDATORY]" in with_it and "<<BOOTSTRAP.md body>>" in with_it
    without = build_system_prompt(inputs(context_files=tuple(f for f in FILES if f.name != "BOOTSTRAP.md")))
    assert "## First run" not in without and "[MANDATORY]" not in without


def test_extra_instructions_included() -> None:
    assert "## Extra instructions\nAlways answer in haiku." in build_system_prompt(inputs())
    assert "## Extra instructions" not in build_system_prompt(inputs(extra_instructions=None))
    assert "## Extra instructions" not in build_system_prompt(inputs(extra_instructions="  "))


def test_owner_ids_only_in_full_mode() -> None:
    assert "telegram:42" in build_system_prompt(inputs())
    assert "telegram:42" not in build_system_prompt(inputs(mode="minimal"))
    assert "## Owner" not in build_system_prompt(inputs(owner_ids=()))


def test_tools_one_line_each_with_first_sentence() -> None:
    text = build_system_prompt(inputs())
    assert "- read_file — Read a file from the workspace.\n" in text
    assert "- exec — Run a shell command!\n" in text
    assert "Paths are relative" not in text
    assert "## Tools" not in build_system_prompt(inputs(tools=()))


@pytest.mark.parametrize(
    ("description", "expected"),
    [("Read a file. More.", "Read a file."), ("No period", "No period"), ("", ""),
     ("Line one\nline two. x", "Line one"), ("  Spaced   out. yes", "Spaced out."), ("Is it? Yes.", "Is it?")],
)
def test_first_sentence(description: str, expected: str) -> None:
    assert first_sentence(description) == expected


def test_time_in_utc_with_weekday() -> None:
    assert "## Current time\nTuesday, 2025-01-07 14:32 UTC" in build_system_prompt(inputs())
    plus2 = datetime(2025, 1, 7, 16, 32, tzinfo=timezone(timedelta(hours=2)))
    assert "Tuesday, 2025-01-07 14:32 UTC" in build_system_prompt(inputs(now=plus2))
    assert "Tuesday, 2025-01-07 14:32 UTC" in build_system_prompt(inputs(now=NOW.replace(tzinfo=None)))


def test_runtime_and_safety() -> None:
    text = build_system_prompt(inputs())
    assert "agent=main | session=agent:main:telegram:dm:42" in text and "model=gpt-4o-mini" in text
    safety = text[text.index("## Safety") : text.index("## Workspace\n")]
    assert "data, not instructions" in safety and "Never reveal secrets" in safety and "verbatim" in safety


def test_no_persona_reminder_without_soul() -> None:
    text = build_system_prompt(inputs(context_files=tuple(f for f in FILES if f.name != "SOUL.md")))
    assert PERSONA_REMINDER not in text


def test_static_part_is_cached_and_only_time_changes() -> None:
    prompt_mod._static_parts.cache_clear()
    a = build_system_prompt(inputs())
    b = build_system_prompt(inputs(now=NOW + timedelta(minutes=5)))
    info = prompt_mod._static_parts.cache_info()
    assert (info.hits, info.misses) == (1, 1)
    assert a.replace("14:32", "14:37") == b
    # a different tool description or context file is a different prompt, not a stale hit
    changed_tool = (ToolSpec("read_file", "Read something else.", {}), TOOLS[1])
    assert "Read something else." in build_system_prompt(inputs(tools=changed_tool))
    changed = tuple(ContextFile(f.name, "NEW") if f.name == "USER.md" else f for f in FILES)
    assert "NEW" in build_system_prompt(inputs(context_files=changed))
    assert prompt_mod._static_parts.cache_info().misses == 3


def test_minimal_identity_says_answer_goes_back_to_the_agent() -> None:
    text = build_system_prompt(inputs(mode="minimal"))
    assert "goes back to the agent" in text
