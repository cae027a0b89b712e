"""Model choice: named models, a conversation's model (``/model``), fallbacks, session titles.

- ``spec``: the nouns (``ModelSpec``, ``Catalog``, ``Route``, ``Plan``, ``Why``);
- ``choice``: the pure rules (which model, what falls back, who may pick, button ids);
- ``router``: ``Models``, the configured models ready to call and each conversation's choice;
- ``config``: the config's models as the runtime takes them (``open_models``);
- ``command``: ``/model`` with a picker where the channel ``Asks``, and its presses;
- ``titles``: a session's title, made in the background after its first exchange.
"""

from bot.models.choice import fallback_reason, note_text
from bot.models.router import Models, fallback_to
from bot.models.spec import Catalog, ModelSpec, Plan, Route, Why

__all__ = ["Catalog", "ModelSpec", "Models", "Plan", "Route", "Why", "fallback_reason", "fallback_to", "note_text"]
