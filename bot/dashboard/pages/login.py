"""The login page: a name and a password (or token); nothing else is reachable without it."""

from __future__ import annotations

from bot.dashboard.pages.layout import bare
from bot.web.html import Html, render


def login_page(*, error: str = "", user: str = "", can_log_in: bool = True) -> Html:
    problem = render('<p class="error" role="alert">{}</p>', error) if error else Html("")
    if not can_log_in:
        problem = Html('<p class="error" role="alert">No dashboard user has a password yet: set one with '
                       "<code>chatgate dashboard passwd -c CONFIG NAME</code>.</p>")
    return bare("Log in", render(
        '<form class="login" method="post" action="/login"><h1>chatgate</h1><p class="note">Operator dashboard</p>{}'
        '<label>Name<input name="user" autocomplete="username" required maxlength="64" value="{}" autofocus></label>'
        '<label>Password or token<input name="password" type="password" autocomplete="current-password" '
        'required maxlength="1024"></label><button type="submit" class="button primary">Log in</button></form>',
        problem, user))
