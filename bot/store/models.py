"""SQL of model choice and session titles (``0014_models``), shared by the store implementations."""

from __future__ import annotations

CHOSEN = "SELECT model, chosen_by, chosen_at FROM session_models WHERE session_key = ?"
CHOOSE = ("INSERT INTO session_models (session_key, model, chosen_by, chosen_at) VALUES (?, ?, ?, ?)"
          " ON CONFLICT (session_key) DO UPDATE SET model = excluded.model, chosen_by = excluded.chosen_by,"
          " chosen_at = excluded.chosen_at")
FORGET = "DELETE FROM session_models WHERE session_key = ?"
SET_TITLE = ("INSERT INTO session_titles (session_id, title, model, created_at) VALUES (?, ?, ?, ?)"
             " ON CONFLICT (session_id) DO NOTHING")
TITLE = "SELECT title FROM session_titles WHERE session_id = ?"
_SESSIONS = (  # a subquery: PostgreSQL orders by an output column only when it stands alone
    "SELECT key, id, created_at, archived_at, title, model, last_at FROM ("
    "SELECT s.key, s.id, s.created_at, s.archived_at, t.title, m.model,"
    " (SELECT MAX(u.created_at) FROM usage u WHERE u.session_id = s.id) AS last_at"
    " FROM sessions s LEFT JOIN session_titles t ON t.session_id = s.id"
    " LEFT JOIN session_models m ON m.session_key = s.key"
    " WHERE s.key NOT LIKE '%:sub:%' {archived}) listed"
    " ORDER BY COALESCE(last_at, created_at) DESC, id DESC LIMIT ?"
)
SESSIONS = _SESSIONS.format(archived="AND s.archived_at IS NULL")  # current ones
ALL_SESSIONS = _SESSIONS.format(archived="")  # those /new archived too
