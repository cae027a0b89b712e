"""Models: named models, a conversation's model, fallbacks (``/model``, the capability that lets
people pick, and session titles are ``bot.models``).

- ``spec``: the nouns (``ModelSpec``, ``Catalog``, ``Route``, ``Plan``, ``Why``);
- ``choice``: the pure rules (which model, what falls back, who may pick, button ids);
- ``router``: ``Models``, the configured models ready to call and each conversation's choice;
- ``config``: the config's models as the runtime takes them (``open_models``).
"""

from bot.routing.choice import fallback_reason, note_text
from bot.routing.router import Models, fallback_to
from bot.routing.spec import Catalog, ModelSpec, Plan, Route, Why

__all__ = ["Catalog", "ModelSpec", "Models", "Plan", "Route", "Why", "fallback_reason", "fallback_to", "note_text"]
