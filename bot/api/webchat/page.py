"""The web chat's HTML: a sign-in page and the chat page. Every value is escaped; the script
and stylesheet are files of this package; nothing inline (the CSP allows none)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

HEAD = ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<title>{title}</title><link rel="stylesheet" href="/static/chat.css"></head>')


def signin_page(message: str = "", token: str = "", csrf: str = "") -> str:
    if token:
        form = ('<form method="post" action="/signin"><input type="hidden" name="token" value="{t}">'
                '<button type="submit">Sign in</button></form>').format(t=escape(token))
    else:
        form = ('<form method="post" action="/code/send"><label>Your name here '
                '<input name="person" autocomplete="username" required></label>'
                '<button type="submit">Send me a code</button></form>'
                '<form method="post" action="/code"><label>Name <input name="person" required></label>'
                '<label>Code <input name="code" inputmode="numeric" autocomplete="one-time-code" required></label>'
                '<button type="submit">Sign in</button></form>')
    note = f'<p class="note">{escape(message)}</p>' if message else ""
    return (HEAD.format(title="Sign in") + '<body class="signin"><main><h1>Chat</h1>' + note
            + '<p>Open the sign-in link you were given, or get a code in the chat app you already use.</p>'
            + form + "</main></body></html>")


def chat_page(person: str, csrf: str, thread: str, threads: Sequence[tuple[str, str]],
              past: Sequence[tuple[int, str, str]], after: str) -> str:
    """``past``: (log id, role, body) of the conversation so far: the person's text as they typed
    it (escaped here), the assistant's already HTML from the dialect. ``after``: the number of
    the last event the page's stream starts after."""
    items = "".join(
        f'<li><a href="/c/{escape(t)}"{" aria-current=page" if t == thread else ""}>{escape(title)}</a></li>'
        for t, title in threads)
    messages = "".join(
        f'<div class="msg {"assistant" if role == "assistant" else "user"}" data-lid="{lid}">'
        f'{text if role == "assistant" else escape(text)}</div>' for lid, role, text in past)
    return (HEAD.format(title="Chat") + f'<body data-thread="{escape(thread)}" data-csrf="{escape(csrf)}" '
            f'data-after="{escape(after)}">'
            '<header><button id="menu" type="button" aria-label="Conversations">☰</button>'
            f'<span class="who">{escape(person)}</span>'
            '<form method="post" action="/new" id="newform"><input type="hidden" name="csrf" '
            f'value="{escape(csrf)}"><button type="submit">New</button></form></header>'
            f'<nav id="threads"><ul>{items}</ul></nav>'
            f'<main id="log" aria-live="polite">{messages}</main>'
            '<form id="composer"><label class="file" title="Attach a file">File<input type="file" id="file"></label>'
            '<span id="attached"></span><textarea id="text" rows="1" placeholder="Message" required></textarea>'
            '<button type="submit" id="send">Send</button><button type="button" id="stop" hidden>Stop</button>'
            '</form><script src="/static/chat.js"></script></body></html>')
