"""The frame of every page and the pieces pages are built from."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from bot.dashboard.assets import url
from bot.web.html import Html, escape, join, render

NAV = (("live", "/live", "Live"), ("conversations", "/conversations", "Conversations"), ("runs", "/runs", "Runs"),
       ("people", "/people", "People"), ("operations", "/operations", "Operations"))


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who looks at the page: their name, whether they may act, the CSRF token for its forms."""

    user: str
    role: str
    may_act: bool
    csrf: str
    flash: str = ""


def page(title: str, body: Html, viewer: Viewer, *, active: str, scripts: Sequence[str] = ()) -> Html:
    nav = join(render('<a href="{}"{}>{}</a>', href, Html(' aria-current="page"') if key == active else Html(""),
                      label) for key, href, label in NAV)
    flash = render('<p class="flash" role="status">{}</p>', viewer.flash) if viewer.flash else Html("")
    tags = join(render('<script src="{}" defer></script>', url(name)) for name in scripts)
    return render(
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="csrf-token" content="{csrf}"><title>{title} · chatgate</title>'
        '<link rel="icon" href="{icon}" type="image/svg+xml"><link rel="stylesheet" href="{css}">{tags}</head>'
        '<body data-may-act="{act}"><header class="top"><a class="brand" href="/live">chatgate</a>'
        '<nav aria-label="Pages">{nav}</nav><div class="who"><span class="user">{user}</span>'
        '<span class="role role-{role}">{role}</span>{logout}</div></header>'
        '<main>{flash}<h1>{title}</h1>{body}</main></body></html>',
        csrf=viewer.csrf, title=title, css=url("app.css"), icon=url("icon.svg"), tags=tags,
        act="yes" if viewer.may_act else "no",
        nav=nav, user=viewer.user, role=viewer.role, flash=flash, body=body,
        logout=action("/logout", "Log out", viewer, css="link"),
    )


def bare(title: str, body: Html) -> Html:
    """A page without the navigation (the login)."""
    return render(
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1"><title>{} · chatgate</title>'
        '<link rel="icon" href="{}" type="image/svg+xml"><link rel="stylesheet" href="{}"></head>'
        '<body class="bare"><main>{}</main></body></html>', title, url("icon.svg"), url("app.css"), body)


def action(path: str, label: str, viewer: Viewer, *, fields: Mapping[str, str] | None = None, css: str = "",
           title: str = "") -> Html:
    """A button that POSTs ``fields`` with the CSRF token (forms work without JavaScript)."""
    hidden = join(render('<input type="hidden" name="{}" value="{}">', k, v) for k, v in (fields or {}).items())
    return render('<form method="post" action="{}" class="inline"><input type="hidden" name="csrf" value="{}">{}'
                  '<button type="submit" class="{}"{}>{}</button></form>', path, viewer.csrf, hidden, css or "button",
                  render(' title="{}"', title) if title else Html(""), label)


def section(title: str, body: Html, *, note: str | Html = "", ident: str = "") -> Html:
    extra = render('<p class="note">{}</p>', note) if note else Html("")
    return render('<section{}><h2>{}</h2>{}{}</section>', render(' id="{}"', ident) if ident else Html(""), title,
                  extra, body)


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, css: str = "", empty: str = "Nothing here.",
          body_id: str = "", cols: Sequence[str] = ()) -> Html:
    """A table whose cells carry their column's name, so that a phone shows each row as a card;
    ``cols``: a class per column (``nowrap``, ``num``)."""
    classes = [render(' class="{}"', c) if c else Html("") for c in cols] + [Html("")] * (len(headers) - len(cols))
    lines = [render("<tr>{}</tr>", join(render('<td data-label="{}"{}>{}</td>', h, k, cell)
                                        for h, k, cell in zip(headers, classes, row))) for row in rows]
    tbody_attr = render(' id="{}"', body_id) if body_id else Html("")
    if not lines and not body_id:
        return render('<p class="empty">{}</p>', empty)
    head = join(render('<th scope="col">{}</th>', h) for h in headers)
    shown = render('<p class="empty"{}>{}</p>', Html(" hidden") if lines else Html(""), empty) if body_id else Html("")
    return render('<div class="table-wrap"><table class="{}"><thead><tr>{}</tr></thead><tbody{}>{}</tbody></table>'
                  '</div>{}', css or "grid", head, tbody_attr, join(lines), shown)


def badge(text: str, kind: str = "") -> Html:
    return render('<span class="badge {}">{}</span>', kind, text)


def pre(text: str) -> Html:
    return render('<pre class="text">{}</pre>', text)


def link(href: str, text: object) -> Html:
    return render('<a href="{}">{}</a>', href, text)


def escape_all(values: Iterable[object]) -> list[Html]:
    return [escape(v) for v in values]
