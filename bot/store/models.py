"""SQL of model choice and session titles (``0012_models``), shared by the store implementations."""

from __future__ import annotations

CHOSEN = "SELECT model, chosen_by, chosen_at FROM session_models WHERE session_key = ?"
CHOOSE = ("INSERT INTO session_models (session_key, model, chosen_by, chosen_at) VALUES (?, ?, ?, ?)"
          " ON CONFLICT (session_key) DO UPDATE SET model = excluded.model, chosen_by = excluded.chosen_by,"
          " chosen_at = excluded.chosen_at")
FORGET = "DELETE FROM session_models WHERE session_key = ?"
SET_TITLE = ("INSERT INTO session_titles (session_id, title, model, created_at) VALUES (?, ?, ?, ?)"
             " ON CONFLICT (session_id) DO NOTHING")
TITLE = "SELECT title FROM session_titles WHERE session_id = ?"
_SESSIONS = (
    "SELECT s.key, s.id, s.created_at, s.archived_at, t.title, m.model,"
    " (SELECT MAX(u.created_at) FROM usage u WHERE u.session_id = s.id) AS last_at"
    " FROM sessions s LEFT JOIN session_titles t ON t.session_id = s.id"
    " LEFT JOIN session_models m ON m.session_key = s.key"
    " WHERE s.key NOT LIKE '%:sub:%' {archived}"
    " ORDER BY COALESCE(last_at, s.created_at) DESC, s.id DESC LIMIT ?"
)
SESSIONS = _SESSIONS.format(archived="AND s.archived_at IS NULL")  # current ones
ALL_SESSIONS = _SESSIONS.format(archived="")  # those /new archived too
