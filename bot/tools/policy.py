"""Which tools one run is offered: the global rules, the group's own, owners-only tools.

A ``ToolPolicy`` is a frozen value a run carries; ``ToolRegistry.restricted(policy)``
turns it into the registry the run uses, so the model is told only about the tools it
may call and a call to any other is refused as an error result. The rules only narrow:

- every layer (``tools.allow``/``tools.deny``, then the group's ``tools``) must let a
  tool through: ``allow`` absent lets every tool through, ``[]`` none; ``deny`` wins
  over ``allow``; names may be globs (``memory_*``);
- a tool in ``tools.owners_only`` is offered to the platform's owners only;
- a tool that is not registered (``exec`` while ``tools.exec.enabled`` is off) is never
  offered, whatever the rules say.

``policy_for`` builds the policy of one message from the config; it is pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the config is only read here; importing its schema would import the channel registry
    from bot.config.schema import ToolsConfig
    from bot.config.types import AccessConfig, ToolRulesConfig


# The tools that change nothing: a sub-agent's only tools; the others act (before one runs on
# several instances, the gate checks that the turn's lane is still this instance's).
READ_ONLY_TOOLS = ("read_file", "list_files", "search_files", "memory_search", "memory_get", "web_fetch",
                   "read_skill", "skill_search")


@dataclass(frozen=True, slots=True)
class ToolRules:
    """One layer: ``allow`` None lets every tool through; ``deny`` wins."""

    where: str  # the config key, for the reason given to the model and in logs
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()

    def refusal(self, name: str) -> str | None:
        if _matches(name, self.deny):
            return f"denied by {self.where}.deny"
        if self.allow is not None and not _matches(name, self.allow):
            return f"not in {self.where}.allow"
        return None


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """What one run may use. The default lets every registered tool through."""

    rules: tuple[ToolRules, ...] = ()
    owners_only: tuple[str, ...] = ()
    is_owner: bool = False

    def refusal(self, name: str) -> str | None:
        """Why ``name`` is not offered, or None when it is."""
        for layer in self.rules:
            if (why := layer.refusal(name)) is not None:
                return why
        if not self.is_owner and _matches(name, self.owners_only):
            return "for owners only"
        return None

    def permits(self, name: str) -> bool:
        return self.refusal(name) is None


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatchcase(name, p) for p in patterns)


def _layer(where: str, rules: ToolRulesConfig) -> ToolRules | None:
    if rules.allow is None and not rules.deny:
        return None
    return ToolRules(where, rules.allow, rules.deny)


def policy_for(tools: ToolsConfig, access: AccessConfig | None, *, platform: str, chat_type: str, chat_id: str,
               is_owner: bool) -> ToolPolicy:
    """The policy of a run for a message in ``chat_id`` (``chat_type`` ``"dm"`` or ``"group"``)
    on ``platform`` whose access settings are ``access`` (None: a local platform without
    any, such as the console). ``is_owner`` is the intake's ``Access.is_owner(msg)``."""
    layers = [_layer("tools", tools)]
    if chat_type == "group" and access is not None and (group := access.group(chat_id)) is not None:
        key = type(access).model_fields["groups"].alias or "groups"  # Slack writes its groups as channels
        layers.append(_layer(f"channels.{platform}.{key}[{group.id}].tools", group.tools))
    return ToolPolicy(tuple(layer for layer in layers if layer is not None), tools.owners_only, is_owner)
