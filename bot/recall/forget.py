"""``chatgate people forget PERSON``: a person's conversations, passages and vectors removed.

PERSON is a linked person (a name in ``agent.identity_links``) or one account (``telegram:42``,
which stands for its linked person when it has one). What is theirs:

- their DMs, on every linked platform: the sessions of every DM key of theirs (the linked DM,
  each account's DM, its threads, their sub-agents' sessions), whole: their words and the
  assistant's answers, the summaries that replaced compacted turns, the titles; the search
  index follows (triggers); the sessions' rows stay, without text, for the usage they count;
- their own sessions in groups (``group_scope: per-user``), the same way;
- the delivered answers of those sessions (the chunks' text) and the traces' previews;
- in every chat, the stored payload of each message they sent (the text and the file names of
  the inbound log; its dedupe key stays, so a redelivery is still never run again);
- the passages and vectors of their DM workspaces' memory.

A group's shared conversation is the group's: a turn there quotes several people, so it stays
(their inbound messages' payloads are removed as above). The workspace folders' files (their
MEMORY.md ...) are files on disk, not the database: remove the folders named in the report.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from bot.conversation import Conversation, workspace_name
from bot.messages import ChatType
from bot.recall.scope import Scope, scope_of
from bot.session_keys import SessionKey, parse_key, person_of
from bot.store.engine import Engine
from bot.store.op import Op, count, execute, rows

if TYPE_CHECKING:
    from bot.config.schema import CoreConfig
    from bot.store.schema_steps import StepStore

_AT_ONCE = 500


@dataclass(frozen=True, slots=True)
class Forgotten:
    sessions: int
    messages: int
    payloads: int
    passages: int
    workspaces: tuple[str, ...]


def accounts_of(who: str, links: dict[str, tuple[str, ...]]) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """(the linked person, their accounts as (platform, user id)) of ``who``: a person's name or an account."""
    person = who if who in links else None
    if person is None and ":" in who:
        platform, _, user_id = who.partition(":")
        person = person_of(platform, user_id, links)
        if person is None:
            return None, ((platform, user_id),)
    if person is None:
        raise ValueError(f"{who!r} is neither a person of agent.identity_links nor an account such as telegram:42")
    found = tuple((a.partition(":")[0], a.partition(":")[2]) for a in links.get(person, ()))
    return person, found


def dm_scope(agent: str, who: str, links: dict[str, tuple[str, ...]]) -> tuple[Scope, tuple[tuple[str, str], ...]]:
    """Every DM key family of ``who`` (as history_search sees them from their DM), and their accounts."""
    person, accounts = accounts_of(who, links)
    if person is not None:
        key = SessionKey(agent, ChatType.DM, person)
        conversation = replace(Conversation.of_key(key), person=person)
    else:
        platform, user_id = accounts[0]
        conversation = Conversation.of_key(SessionKey(agent, ChatType.DM, user_id, platform))
    return scope_of(conversation, links), accounts


def forget(d: Engine, scope: Scope, accounts: tuple[tuple[str, str], ...]) -> Op[Forgotten]:
    where, args = scope.where("key", subs=True)
    found = yield from rows(f"SELECT id, key FROM sessions WHERE {where}", *args)
    mine = set(accounts)
    for id_, key in (yield from rows("SELECT id, key FROM sessions WHERE key LIKE '%:user:%'")):
        try:
            k = parse_key(str(key))
        except ValueError:
            continue
        if k.kind is ChatType.GROUP and (k.platform, k.member) in mine:
            found.append((id_, key))
    ids = [int(r[0]) for r in found]
    keys = sorted({str(r[1]) for r in found})
    messages = 0
    for start in range(0, len(ids), _AT_ONCE):
        part, part_args = d.any_of("session_id", ids[start:start + _AT_ONCE], "bigint")
        runs = [r[0] for r in (yield from rows(f"SELECT DISTINCT run_id FROM messages WHERE {part}", *part_args))]
        messages += yield from count(f"DELETE FROM messages WHERE {part}", *part_args)
        yield from execute(f"DELETE FROM summaries WHERE {part}", *part_args)
        yield from execute(f"DELETE FROM session_titles WHERE {part}", *part_args)
        for at in range(0, len(runs), _AT_ONCE):
            answers, answer_args = d.any_of("answer_id", runs[at:at + _AT_ONCE], "text")
            yield from execute(f"UPDATE chunks SET text = '', file_data = NULL WHERE {answers} AND sent_at IS NOT NULL",
                               *answer_args)
    for start in range(0, len(keys), _AT_ONCE):
        part, part_args = d.any_of("session_key", keys[start:start + _AT_ONCE], "text")
        yield from execute(f"UPDATE spans SET preview = '' WHERE run_id IN (SELECT run_id FROM traces WHERE {part})",
                           *part_args)
    payloads = 0
    sender = d.read_field("payload", "sender", "id")
    for platform, user_id in accounts:
        payloads += yield from count(
            f"UPDATE inbound SET payload = '' WHERE platform = ? AND payload <> '' AND answered_at IS NOT NULL"
            f" AND {sender} = ?", platform, user_id)
    workspaces = sorted({workspace_name(parse_key(k)) for k in keys} | {workspace_name(parse_key(k))
                                                                      for k in scope.keys})
    passages = 0
    for start in range(0, len(workspaces), _AT_ONCE):
        part, part_args = d.any_of("workspace", workspaces[start:start + _AT_ONCE], "text")
        passages += yield from count(f"DELETE FROM recall_passages WHERE {part}", *part_args)
    return Forgotten(len(ids), messages, payloads, passages, tuple(workspaces))


async def forget_person(store: StepStore, agent: str, who: str, links: dict[str, tuple[str, ...]]) -> Forgotten:
    scope, accounts = dm_scope(agent, who, links)
    return await store.write(forget(store.engine, scope, accounts))


async def _forget(config: CoreConfig, args: argparse.Namespace) -> int:
    from bot.capabilities.commandline import no_database, store_of
    from bot.recall.schema import MIGRATIONS

    links = {name: tuple(accounts) for name, accounts in config.agent.identity_links.items()}
    try:
        dm_scope(config.agent.id, args.person, links)
    except ValueError as exc:
        print(f"chatgate people forget: {exc}", file=sys.stderr)
        return 2
    if not args.yes:
        print(f"This removes {args.person}'s conversations, memory passages and vectors for good; "
              "add --yes to go ahead.", file=sys.stderr)
        return 2
    if no_database(config):
        return 0
    async with store_of(config) as store:
        await store.apply_steps("recall", MIGRATIONS)
        done = await forget_person(store, config.agent.id, args.person, links)
    print(f"forgot {args.person}: {done.messages} messages in {done.sessions} sessions, {done.payloads} stored "
          f"inbound messages, {done.passages} memory passages")
    root = config.workspace.root
    for name in done.workspaces:
        if (root / name).exists():
            print(f"their workspace folder is on disk, remove it by hand if it should go too: {root / name}")
    return 0


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    people = sub.add_parser("people", help="what the bot keeps of a person")
    actions = people.add_subparsers(dest="action", required=True)
    forgetting = actions.add_parser("forget", help="remove a person's messages, memory passages and vectors")
    forgetting.add_argument("person", help="a person of agent.identity_links, or an account such as telegram:42")
    forgetting.add_argument("--yes", action="store_true", help="really remove them (nothing is asked)")
    forgetting.add_argument("-c", "--config", help="path to config.yaml (default: ./config.yaml, else defaults)")
    forgetting.set_defaults(run=_forget)
