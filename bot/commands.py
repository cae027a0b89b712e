"""Chat commands: parsed here, answered by the gateway at once, even during a run."""

from __future__ import annotations

from dataclasses import dataclass

NAMES = ("stop", "stopall", "new", "reset", "status", "compact", "help", "start", "whoami")

# The commands a platform registers with its own menu (Telegram's command list, Slack's and
# Discord's slash commands): (name, description). Adapters read it through bot.channels.
MENU: tuple[tuple[str, str], ...] = (
    ("stop", "Stop the current answer"),
    ("new", "Start a fresh conversation"),
    ("status", "Model, context and cost of this conversation"),
    ("compact", "Summarise the conversation so far to free context"),
    ("whoami", "Your id on this platform"),
    ("help", "What I can do"),
)

HELP = """\
/stop – stop the current answer (and drop messages waiting behind it)
/new – start a fresh conversation (the old one is kept)
/status – model, context use, tokens and cost of this conversation
/compact – summarise the conversation so far (frees context; nothing is deleted)
/whoami – your id on this platform, for an allowlist
/stopall – stop every run in this chat (owners)
/help – this list"""


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    args: str = ""


def parse_command(text: str, bot_username: str | None = None) -> Command | None:
    """``/name[@bot] args`` -> Command for the commands we know; None for plain text, an
    unknown command (the model sees it), or a command addressed to another bot."""
    if not text.startswith("/") or len(text) < 2:
        return None
    head, _, args = text[1:].partition(" ")
    name, _, target = head.partition("@")
    name = name.lower()
    if name not in NAMES:
        return None
    if target and (bot_username is None or target.lower() != bot_username.lower().lstrip("@")):
        return None
    return Command(name, args.strip())


def status_text(*, model: str, context_tokens: int, context_window: int, input_tokens: int, output_tokens: int,
                cost: float, turns: int, running: bool, queued: int, cache_read_tokens: int = 0,
                last_compaction: tuple[int, int] | None = None) -> str:
    """``context_tokens``: the size of the next request (``Agent.next_request_tokens``);
    ``last_compaction``: its tokens before and after (``Agent.last_compaction``)."""
    share = context_tokens / context_window * 100 if context_window else 0.0
    state = "a run is active" if running else "idle"
    if queued:
        state += f", {queued} message{'s' if queued != 1 else ''} waiting"
    cached = f" ({cache_read_tokens:,} from cache)" if cache_read_tokens else ""
    compacted = (f"Last compaction: {last_compaction[0]:,} -> {last_compaction[1]:,} tokens\n"
                 if last_compaction else "")
    return (f"Model: {model}\n"
            f"Context: {context_tokens:,} of {context_window:,} tokens ({share:.0f}%)\n"
            f"{compacted}"
            f"This conversation: {turns} turns, {input_tokens:,} tokens in{cached}, {output_tokens:,} out, "
            f"${cost:.4f}\n"
            f"Now: {state}")
