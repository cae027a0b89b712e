"""Conversations: the sessions, and one conversation with its turns, tool calls folded and
compaction summaries marked. Every text is shown as text, scrubbed of configured secrets."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from urllib.parse import quote

from bot.agent.transcript import ADDRESSED_HEADING, QUOTE
from bot.dashboard.live import session_label
from bot.dashboard.pages.layout import Viewer, badge, link, page, table
from bot.llm import ImagePart, Message, Role, TextPart, ThinkingPart, ToolCall, ToolResult
from bot.store.base import Summary
from bot.store.reports import LoggedMessage, SessionLog, SessionSummary
from bot.web.html import Html, ago, clip, count, escape, join, path, plural, render, usd, when

Redact = Callable[[str], str]
TITLE_CHARS = 120
_HEADER = re.compile(r'from ".*" \(id [^()]*\):')
TOOL_TEXT = 4000  # characters of a tool call's arguments or result shown (the rest is cut, and said so)


def sessions_page(viewer: Viewer, sessions: Sequence[SessionSummary], search: str, *, limit: int) -> Html:
    form = render('<form class="search" method="get" action="/conversations" role="search">'
                  '<input type="search" name="q" value="{}" placeholder="Person, session or text" '
                  'aria-label="Search by person, session or text" maxlength="200">'
                  '<button type="submit" class="button">Search</button>{}</form>', search,
                  link("/conversations", "Clear") if search else Html(""))
    rows = [(link(path("conversations", s.id), title_of(s.title) or "(no text)"),
             render('<span title="{}">{}</span>', s.key, session_label(s.key)),
             s.sender or "—", render('<span title="{}">{}</span>', when(s.last_activity), ago(s.last_activity)),
             f"{count(s.input_tokens)} in / {count(s.output_tokens)} out", usd(s.cost),
             join([escape(str(s.turns)), badge("archived", "muted") if s.archived else Html("")], " "))
            for s in sessions]
    found = (f"{plural(len(sessions), 'session')} matching “{clip(search, 60)}”" if search else
             f"The {plural(len(sessions), 'session')} with the latest activity" if len(sessions) >= limit else
             plural(len(sessions), "session"))
    body = join([form, render('<p class="note">{}</p>', found),
                 table(("Conversation", "Session", "Person", "Last activity", "Tokens", "Cost", "Turns"), rows,
                       empty="No conversation matches." if search else "No conversation yet.",
                       cols=("", "", "", "nowrap", "num", "num"))])
    return page("Conversations", body, viewer, active="conversations")


def conversation_page(viewer: Viewer, log: SessionLog, redact: Redact) -> Html:
    s = log.session
    facts = render('<dl class="facts"><dt>Session</dt><dd><code>{}</code></dd><dt>Person</dt><dd>{}</dd>'
                   '<dt>Started</dt><dd>{}</dd><dt>Last activity</dt><dd>{}</dd><dt>Tokens</dt><dd>{} in, {} out</dd>'
                   '<dt>Cost</dt><dd>{}</dd><dt>Turns</dt><dd>{}</dd></dl>', s.key, s.sender or "—", when(s.created_at),
                   when(s.last_activity), f"{s.input_tokens:,}", f"{s.output_tokens:,}", usd(s.cost), s.turns)
    earlier = (render('<p class="note">{} earlier left out.</p>', plural(log.earlier, "message"))
               if log.earlier else Html(""))
    runs = render('<p><a href="{}">Runs of this session</a></p>', "/runs?session=" + quote(s.key, safe=""))
    body = join([facts, runs, earlier, transcript(log.messages, log.summaries, redact)])
    return page(title_of(s.title) or session_label(s.key), body, viewer, active="conversations")


def title_of(text: str) -> str:
    """What was asked, in a line: a group turn's headings and sender headers taken off, its
    quoted lines unquoted (``bot.agent.transcript`` writes them)."""
    if ADDRESSED_HEADING in text:
        text = text.split(ADDRESSED_HEADING, 1)[1]
    lines = [line[len(QUOTE):] if line.startswith(QUOTE) else line for line in text.splitlines()
             if not _HEADER.fullmatch(line.strip())]
    return clip(" ".join(lines), TITLE_CHARS)


def transcript(messages: Sequence[LoggedMessage], summaries: Sequence[Summary], redact: Redact) -> Html:
    """The messages turn by turn (a turn is one run's messages); a summary sits after the last
    message it covers, and the messages it replaced are marked compacted."""
    after: dict[int, list[Summary]] = {}
    for summary in summaries:
        after.setdefault(summary.through_id, []).append(summary)
    placed: set[int] = set()
    out: list[Html] = []
    run = None
    for m in messages:
        if m.run_id != run:
            if run is not None:
                out.append(Html("</ol></article>"))
            run = m.run_id
            out.append(render('<article class="turn"><header class="turn-head"><span>{}</span>'
                              '<a href="{}">run {}</a></header><ol class="messages">', when(m.created_at),
                              path("runs", m.run_id), m.run_id[:12]))
        out.append(message_item(m, redact))
        for summary in after.get(m.id, ()):
            placed.add(id(summary))
            out.append(Html("</ol></article>"))
            out.append(summary_item(summary, redact))
            out.append(render('<article class="turn"><header class="turn-head"><span>{}</span></header>'
                              '<ol class="messages">', "(continued)"))
    if run is not None:
        out.append(Html("</ol></article>"))
    early = [s for s in summaries if id(s) not in placed]  # covering only messages left out above
    if not messages and not early:
        return render('<p class="empty">{}</p>', "No message yet.")
    return join([*(summary_item(s, redact) for s in early), *out])


def summary_item(summary: Summary, redact: Redact) -> Html:
    return render('<aside class="summary"><header>{} <span>{}: {} replaced, {} → {} tokens</span></header>'
                  '<pre class="text">{}</pre></aside>', badge("compaction summary", "info"), when(summary.created_at),
                  plural(summary.messages, "message"), f"{summary.tokens_before:,}", f"{summary.tokens_after:,}",
                  redact(summary.text))


def message_item(m: LoggedMessage, redact: Redact) -> Html:
    role = {Role.USER: "user", Role.ASSISTANT: "assistant", Role.TOOL: "tool"}[m.message.role]
    marks = badge("compacted", "muted") if m.compacted else Html("")
    return render('<li class="message {}{}"><div class="who">{} {}</div>{}</li>', role,
                  " compacted" if m.compacted else "", role, marks, parts(m.message, redact))


def parts(message: Message, redact: Redact) -> Html:
    out = []
    for p in message.parts:
        if isinstance(p, TextPart):
            if p.text:
                out.append(render('<pre class="text">{}</pre>', redact(p.text)))
        elif isinstance(p, ToolCall):
            out.append(folded(f"→ {p.name}", p.arguments, redact, css="call"))
        elif isinstance(p, ToolResult):
            out.append(folded("← error" if p.is_error else "← result", p.content, redact,
                              css="result error" if p.is_error else "result"))
        elif isinstance(p, ThinkingPart):
            out.append(folded("thinking", p.thinking or "(redacted by the provider)", redact, css="thinking"))
        elif isinstance(p, ImagePart):
            out.append(render('<p class="note">{}</p>', f"[an image, {p.media_type}]"))
    return join(out)


def folded(label: str, text: str, redact: Redact, *, css: str) -> Html:
    shown = redact(text[: TOOL_TEXT * 2])
    cut = len(text) > TOOL_TEXT
    shown = shown[:TOOL_TEXT]
    return render('<details class="{}"><summary>{} <small>{}</small></summary><pre class="text">{}</pre>{}</details>',
                  css, label, plural(len(text), "character"), shown,
                  render('<p class="note">{}</p>', "… cut here") if cut else Html(""))
