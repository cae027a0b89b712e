"""One run of the agent: think -> act -> observe, until the model answers.

Phases: setup (run id, trace, workspace, tool context) -> input checks (guard, truncation:
``bot.agent.input``) -> messages (system prompt, history pipeline, the new user turn) -> the
LLM loop (stream, tools, repeat) -> finalize (sanitize, NO_REPLY, store the turn atomically
with its trace) -> events. Errors meant for users come back as a result with
one human sentence; a cancellation stores what happened so far, with every unfinished
tool call answered "Tool execution cancelled by user", and propagates.

The model of a run is its conversation's (``bot.routing``: the one picked with ``/model``,
else the default), with the fallbacks it may move to when its first call fails with a
"not now" error before any tool ran or any text streamed; costs, traces and the turn name
the model that answered.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from contextlib import aclosing
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from bot import tokens
from bot.agent.compaction import CompactionResult, Compactor, should_compact, summary_message
from bot.agent.events import EventBus, EventKind, Phase, RunEvent
from bot.agent.guard import REFUSAL
from bot.agent.history import build_history, repair_pairing
from bot.agent.input import new_input, save_uploads, with_context
from bot.agent.prompt import PromptInputs, PromptMode, build_prompt_parts, context_file_names
from bot.agent.run import AgentSettings, PostRunHook, RunRequest, RunResult, RunState, RunStatus, senders
from bot.conversation import Conversation
from bot.errors import ProviderError
from bot.limits import Bill, Meter
from bot.llm import ImagePart, Message, Role, ToolCall, ToolResult
from bot.logs import about_run
from bot.providers.base import ChatRequest, Completed, Provider, RetryInfo, TextDelta, ThinkingDelta, ToolSpec, Usage
from bot.routing import Models, ModelSpec, Plan, Route, Why, fallback_reason, fallback_to, note_text
from bot.store.base import CompactingStore, Session, Summary, Turn
from bot.text.silence import NoReplyHoldback, final_answer
from bot.tools.base import Gate, ToolContext
from bot.tools.policy import ToolPolicy
from bot.tools.registry import RepeatDetector, ToolRegistry
from bot.tools.toolset import Toolset
from bot.tracing import Redactor, TraceBuilder
from bot.workspace import Workspaces, load_context_files

# the run's nouns live in bot.agent.run; callers import them from here
__all__ = ["FAILED", "Agent", "AgentSettings", "PostRunHook", "RunRequest", "RunResult", "RunStatus", "senders"]

log = logging.getLogger(__name__)

HISTORY_LOAD = 400  # at most this many stored messages read per run; the pipeline then limits by turns
HISTORY_PAGE = 4  # stored messages first read per turn sent (doubled while too few turns came back)
CANCELLED_RESULT = "Tool execution cancelled by user"
FAILED = "Something went wrong on my side while answering (it has been logged). Please try again."
TOO_MANY_CALLS = "Not run: at most {n} tool calls run per step; make this call again in the next step."
REPEATED_RESULT = "Not run: this exact call was already made twice in a row with the same arguments."


class Agent:
    def __init__(
        self,
        settings: AgentSettings,
        provider: Provider,
        store: CompactingStore,
        events: EventBus,
        tools: ToolRegistry,
        workspaces: Workspaces,
        cost: Callable[[str, Usage], float],
        redactor: Redactor | None = None,
        post_run: Sequence[PostRunHook] = (),
        meter: Meter | None = None,
        toolsets: Sequence[Toolset] = (),
        gate: Gate | None = None,
        models: Models | None = None,
    ) -> None:
        self.settings = settings
        self._store = store
        self._events = events
        self._tools = tools
        self._workspaces = workspaces
        self._redactor = redactor or Redactor()
        self._post_run = post_run  # the app's list: a capability adds its hook as it opens, before any run
        self._meter = meter
        self._toolsets = toolsets  # the app's list: a capability adds its toolset as it opens, before any run
        self._gate = gate  # hooks and approvals, before each tool call
        self._models = models  # a conversation's model; None: always the settings' model on ``provider``
        self._plain = Plan(Route(ModelSpec("", settings.provider, settings.model, "chat", settings.context_window,
                                           settings.max_tokens), provider, cost))
        self.compactor = Compactor(self._plain.route, store, tools, settings=settings.compaction,
                                   redactor=self._redactor, meter=meter)

    async def complete(self, request: RunRequest) -> RunResult:
        """``run``, then store its turn as it is (no answer to deliver: sub-agents, tools run by
        hand, tests), then the post-run hooks; the turn runner (``bot.turns``) stores the turn
        with the rendered answer instead, and then calls ``finished``."""
        result = await self.run(request)
        if result.turn is not None:
            await self._store.append_turn(result.turn)
        await self.finished(request, result)
        return result

    async def run(self, request: RunRequest) -> RunResult:
        """One run, computed: its ``RunResult.turn`` is for the caller to commit (a cancelled
        run's turn is stored here, as nothing else can). Its log records name the run and session."""
        with about_run(request.run_id, request.session_key):
            return await self._run(request)

    async def finished(self, request: RunRequest, result: RunResult) -> None:
        """The post-run hooks, once the turn is stored; a failing hook is logged."""
        for hook in self._post_run:
            try:
                await hook(request, result)
            except Exception:
                log.exception("post-run hook failed session=%s run=%s", request.session_key, request.run_id)

    async def _run(self, request: RunRequest) -> RunResult:
        s = self.settings
        bill = Bill(request.payers, self._meter)
        trace = TraceBuilder(request.run_id, request.session_key, s.agent_id, s.model, self._redactor, bill=bill)
        run = RunState(request, trace, bill, self._plain.route)
        conv = request.conversation
        await self._emit(request, EventKind.STARTED)
        try:
            # Setup
            plan = await self.plan(conv)
            run.use(plan.route)
            run.fallbacks = plan.fallbacks
            workspace = await self._workspaces.prepare(conv)
            ctx = ToolContext(workspace, conv, request.run_id, s.agent_id, request.acting_for, request.sender_is_owner,
                              on_sub_agent=lambda c: run.trace.sub_agent(
                                  c.session_key, c.started, c.usage, c.cost, is_error=c.status == "failed",
                                  output=c.text, seconds=c.seconds),
                              tool_policy=request.tool_policy, payers=request.payers, gate=self._gate,
                              on_approval=run.trace.approval, users=request.people)
            offers = [toolset.offer(ctx) for toolset in self._toolsets]
            tools = self._tools.restricted(request.tool_policy).joined(
                (t for offer in offers for t in offer.tools), request.tool_policy,
                held=(t for offer in offers for t in offer.held),
                replacing=(t for offer in offers for t in offer.replacing))
            if tools.held():  # its tools may enable them (mcp_tool_search)
                ctx = replace(ctx, held=tools)
            sections = tuple(offer.prompt for offer in offers if offer.prompt)
            inbound = await save_uploads(workspace, request.inbound)
            # Input
            given = new_input(inbound, request.context, request.task, guard=s.guard, max_chars=s.max_message_chars,
                              session_key=request.session_key, owners=s.owners)
            blocked_or_task = given.blocked or not inbound
            run.new.append(given.message if blocked_or_task else await with_context(self._toolsets, ctx, given.message))
            if given.blocked:
                run.new.append(Message.assistant(REFUSAL))
                return await self._finish(run, RunStatus.COMPLETED, REFUSAL)
            # Messages
            specs = tools.specs()

            def prompt(route: Route) -> tuple[str, str]:
                return self._prompt(request.prompt_mode or s.prompt_mode, conv, workspace, route, specs, sections)

            history, run.live = await self._history(request.session, run.route.spec.context_window)
            # Think -> act -> observe
            text = await self._loop(run, tools, prompt, history, ctx)
        except ProviderError as exc:
            log.warning("run failed session=%s run=%s: %s", request.session_key, request.run_id, exc)
            run.close_pending(CANCELLED_RESULT)
            return await self._finish(run, RunStatus.FAILED, error=exc.user_message)
        except Exception:
            log.exception("run failed unexpectedly session=%s run=%s", request.session_key, request.run_id)
            run.close_pending(CANCELLED_RESULT)
            return await self._finish(run, RunStatus.FAILED, error=FAILED)
        except asyncio.CancelledError:
            if partial := "".join(run.streamed):
                run.new.append(Message.assistant(partial))
            run.close_pending(CANCELLED_RESULT)
            await self._finish(run, RunStatus.CANCELLED)
            raise
        answer = final_answer(text, is_group=conv.is_group)  # sanitizes, then NO_REPLY
        if answer is None:
            return await self._finish(run, RunStatus.SILENT)
        return await self._finish(run, RunStatus.COMPLETED, answer)

    async def plan(self, conversation: Conversation) -> Plan:
        """The model a run of ``conversation`` starts on, and its fallbacks."""
        return self._plain if self._models is None else await self._models.plan(conversation)

    async def _history(self, session: Session, window: int) -> tuple[list[Message], int]:
        """What the next request starts with: the summary (if any), then the live history
        through the pipeline (limit turns, prune tool results, repair pairing); and how many
        live messages the session has in all (for compaction)."""
        s = self.settings
        limit = min(HISTORY_LOAD, max(16, s.history_turns * HISTORY_PAGE))
        while True:  # read as little as gives history_turns turns: a long session costs no more
            recent = await self._store.recent(session, limit)
            stored = recent.messages
            if len(stored) < limit or limit >= HISTORY_LOAD or \
                    sum(m.role is Role.USER for m in stored) >= s.history_turns:
                break
            limit = min(HISTORY_LOAD, limit * 2)
        history = build_history(stored, max_turns=s.history_turns, context_window=window)
        return ([summary_message(recent.summary.text), *history] if recent.summary else history), recent.live

    async def _loop(self, run: RunState, tools: ToolRegistry, prompt: Callable[[Route], tuple[str, str]],
                    history: list[Message], ctx: ToolContext) -> str:
        """Call the model until it answers without tools; the answer's raw text.

        A request is ``base`` then the turn's messages from ``covered`` on: the history and
        the whole turn, until a mid-loop compaction makes ``base`` a summary of the oldest
        ~70 % plus the rest (in memory only; the turn is stored whole). ``prompt`` gives the
        system prompt for a model: once, and again only if the run falls back."""
        repeats = RepeatDetector()
        s = self.settings
        system, volatile = prompt(run.route)
        whole_system = f"{system}\n\n{volatile}"  # what is counted: the volatile part is sent too
        base, covered = list(history), 0
        reported: tuple[int, int] | None = None  # (prompt tokens the provider reported, messages sent)
        may_compact = s.compaction.enabled
        while run.iterations < s.max_iterations:
            run.iterations += 1
            await self._emit(run.request, EventKind.ACTIVITY, phase=Phase.THINKING)
            specs = tools.specs()  # cached; it changes only when a tool enabled more (ToolContext.held)
            messages = [*base, *run.new[covered:]]
            model, threshold = run.route.spec.model, s.compaction.trigger_ratio * run.route.spec.context_window
            run.prompt_tokens = await self._prompt_tokens(whole_system, messages, specs, reported, threshold, model)
            if may_compact and run.prompt_tokens >= threshold:
                done = await self.compactor.using(run.route).compact_in_memory(messages, run.trace,
                                                                               run.request.session_key)
                may_compact = done is not None  # one failure is enough for this run
                if done is not None:  # from now on: the summary, the rest, then what the turn adds
                    summary, cut = done
                    base, covered = repair_pairing([summary, *messages[cut:]]), len(run.new)
                    messages = list(base)
                    run.prompt_tokens, reported = tokens.count_request(whole_system, messages, specs, model), None
            while True:  # the model's call, or a fallback's when it is busy or down before anything happened
                try:
                    completed = await self._think(run, run.route.request(system, tuple(messages), specs, volatile))
                    break
                except ProviderError as exc:
                    if (fallback := self._fallback(run, exc)) is None:
                        raise
                    run.use(fallback)
                    system, volatile = prompt(fallback)
                    whole_system = f"{system}\n\n{volatile}"
            if completed.usage.input_tokens:
                reported = (completed.usage.input_tokens, len(messages))
                run.prompt_tokens = completed.usage.input_tokens
            run.new.append(completed.message)
            calls = completed.message.tool_calls
            if not calls:
                return completed.message.text
            run.pending, run.done = calls, {}
            if (repeated := repeats.observe(calls)) is not None:
                log.warning("repeated tool call %s stopped session=%s run=%s", repeated.name,
                            run.request.session_key, run.request.run_id)
                run.close_pending(REPEATED_RESULT)
                return (f"I stopped because I was repeating the same step ({repeated.name}) "
                        "without making progress. Tell me how you would like me to go on.")
            await self._emit(run.request, EventKind.ACTIVITY, phase=Phase.TOOLS)
            await self._act(run, tools, calls, ctx)
        log.info("max iterations reached session=%s run=%s", run.request.session_key, run.request.run_id)
        return (f"I reached the limit of {s.max_iterations} steps for one request before finishing. "
                "Ask me to continue if you want me to go on.")

    def _fallback(self, run: RunState, exc: ProviderError) -> Route | None:
        """The next model when ``exc`` means "not now" and nothing happened yet in this turn
        (no tool ran, no text streamed); None otherwise."""
        reason = fallback_reason(exc)
        if reason is None or not run.fallbacks or run.streamed or any(m.role is Role.TOOL for m in run.new):
            return None
        nxt, run.fallbacks = fallback_to(run.route, run.fallbacks[0], reason), run.fallbacks[1:]
        log.warning("model %s failed (%s); falling back to %s session=%s run=%s", run.route.spec.label, exc,
                    nxt.spec.label, run.request.session_key, run.request.run_id)
        return nxt

    async def _prompt_tokens(self, system: str, messages: list[Message], specs: tuple[ToolSpec, ...],
                             reported: tuple[int, int] | None, threshold: float, model: str) -> int:
        """The size of the next request: the provider's last report plus what was added since,
        counted exactly only when it could reach ``threshold`` (a bound from lengths says when),
        so a short conversation costs no encoding and loads none."""
        if reported is not None:
            added = messages[reported[1]:]
            if reported[0] + tokens.upper_bound("", added) < threshold:
                return reported[0] + tokens.estimate("", added)
            await tokens.ready(model)
            return reported[0] + tokens.count_messages(added, model)
        if tokens.upper_bound(system, messages, specs) < threshold:
            return tokens.estimate(system, messages, specs)
        await tokens.ready(model)
        return tokens.count_request(system, messages, specs, model)

    async def _think(self, run: RunState, request: ChatRequest) -> Completed:
        """One streamed LLM call: chunks out (NO_REPLY held back), a span in the trace."""
        holdback = NoReplyHoldback()
        run.streamed = []
        started = time.time()

        async def on_retry(info: RetryInfo) -> None:
            await self._events.emit(RunEvent(EventKind.RETRYING, run.request.run_id, run.request.conversation,
                                             retry=info))

        completed: Completed | None = None
        route = run.route
        announce = route.why is Why.FALLBACK and not run.announced
        try:
            async with aclosing(route.provider.stream(request, on_retry=on_retry)) as stream:
                async for event in stream:
                    if announce:  # a fallback answers: the chat hears of it once, before the answer
                        announce = False
                        await self._announce(run)
                    if isinstance(event, TextDelta):
                        run.streamed.append(event.text)
                        if shown := holdback.feed(event.text):
                            await self._emit(run.request, EventKind.DELTA, shown)
                    elif isinstance(event, ThinkingDelta):
                        await self._emit(run.request, EventKind.THINKING, event.text)
                    elif isinstance(event, Completed):
                        completed = event
        except ProviderError:
            run.trace.llm(request.model, started, Usage(), 0.0, is_error=True)
            raise
        except asyncio.CancelledError:  # /stop or an interrupt mid-stream: the provider bills it anyway
            usage = Usage(run.prompt_tokens, tokens.estimate("", [Message.assistant("".join(run.streamed))]))
            run.trace.llm(request.model, started, usage, route.cost(request.model, usage), is_error=True,
                          preview="(cancelled; tokens estimated)")
            raise
        assert completed is not None, "a provider stream ends with Completed"
        if rest := holdback.finish():
            await self._emit(run.request, EventKind.DELTA, rest)
        run.streamed = []
        model = completed.model or request.model
        run.trace.llm(model, started, completed.usage, route.cost(model, completed.usage),
                      preview=completed.message.text)
        return completed

    async def _announce(self, run: RunState) -> None:
        """A fallback answers: the chat's note, the first time this model stands in there."""
        run.announced = True
        route, notify = run.route, run.request.notify
        if notify is not None and self._models is not None:
            try:
                if await self._models.first_note(run.request.session_key, route):
                    await notify(note_text(route.spec.label, route.instead_of, route.reason))
            except Exception:  # the note is a courtesy: the answer goes on without it
                log.warning("the fallback note could not be owed session=%s run=%s", run.request.session_key,
                            run.request.run_id, exc_info=True)

    async def _act(self, run: RunState, tools: ToolRegistry, calls: tuple[ToolCall, ...], ctx: ToolContext) -> None:
        """Run the calls (concurrently when several), results in the calls' order."""
        for call in calls:
            await self._emit(run.request, EventKind.TOOL_CALL, tool=call)
        started = time.time()

        def finished(call: ToolCall, result: ToolResult, seconds: float) -> None:
            run.trace.tool(call.name, started, is_error=result.is_error, output=result.content, seconds=seconds)

        allowed, extra = calls[:self.settings.max_tool_calls_per_step], calls[self.settings.max_tool_calls_per_step:]
        images: dict[str, tuple[ImagePart, ...]] = {}
        results = await tools.execute(allowed, ctx, done=run.done, on_done=finished, images=images)
        results += [ToolResult(c.id, TOO_MANY_CALLS.format(n=self.settings.max_tool_calls_per_step), is_error=True)
                    for c in extra]
        # images a tool returned follow the results (both providers show them to the model there)
        shown = tuple(image for c in allowed for image in images.get(c.id, ()))
        run.new.append(Message(Role.TOOL, (*results, *shown)))
        run.pending = ()
        for call, result in zip(calls, results, strict=True):
            await self._emit(run.request, EventKind.TOOL_RESULT, tool=call, is_error=result.is_error)

    async def _finish(self, run: RunState, status: RunStatus, text: str = "", error: str | None = None) -> RunResult:
        """Store the turn with its trace in one transaction, emit the end event, build the result."""
        r = run.request
        record = run.trace.finish(status.value, run.iterations, error)
        # A cancelled run's messages stay unanswered: /stop answers them, a restart runs them again.
        # Whoever commits a finished turn with an answer to deliver sets ``answer`` and ``settle``.
        settle = status is not RunStatus.CANCELLED
        turn = Turn(r.session, r.run_id, tuple(run.new), run.trace.usage, run.trace.cost, run.route.spec.model,
                    r.inbound_ids, record, None, settle, run.bill.charges())
        if not settle:  # nobody else can: stored although the task is being cancelled
            await asyncio.shield(self._store.append_turn(turn))
        kind = {RunStatus.FAILED: EventKind.FAILED, RunStatus.CANCELLED: EventKind.CANCELLED}.get(
            status, EventKind.COMPLETED)
        await self._events.emit(RunEvent(kind, r.run_id, r.conversation, error or text, usage=run.trace.usage,
                                         trace=record))
        live = None if run.live is None else run.live + len(run.new)
        return RunResult(r.run_id, status, run.route, text, run.trace.usage, run.trace.cost, run.iterations, error,
                         run.prompt_tokens, turn if settle else None, live)

    def _prompt(self, mode: PromptMode, conversation: Conversation, workspace: Path, route: Route,
                tools: tuple[ToolSpec, ...], sections: tuple[str, ...] = ()) -> tuple[str, str]:
        """(stable, volatile) parts of the system prompt (the runtime line names ``route``'s model)."""
        s = self.settings
        names = context_file_names(mode, conversation.chat_type)
        return build_prompt_parts(PromptInputs.of(
            conversation, mode=mode, agent_id=s.agent_id, tools=tools, workspace=workspace,
            context_files=tuple(load_context_files(workspace, names,  # a group's prompt follows no link
                                                   follow_links=not conversation.is_group)),
            owner_ids=s.owners, now=datetime.now(timezone.utc), model=route.spec.model, provider=route.spec.provider,
            extra_instructions=s.system_prompt, toolset_sections=sections,
        ))

    # -- context: what the intake and the turn runner call for /status, /compact and after a run --

    async def next_request_tokens(self, session: Session, conversation: Conversation) -> int:
        """The tokens of the next request of this session as it stands: system prompt, tool
        definitions, summary and history (the new message not included)."""
        workspace = await self._workspaces.prepare(conversation)
        spec = (route := (await self.plan(conversation)).route).spec
        specs = self._tools.specs()
        system, volatile = self._prompt("full", conversation, workspace, route, specs)
        history, _ = await self._history(session, spec.context_window)
        await tokens.ready(spec.model)
        return tokens.count_request(f"{system}\n\n{volatile}", history, specs, spec.model)

    async def last_compaction(self, session: Session) -> Summary | None:
        """The session's latest compaction (its tokens before and after), for /status."""
        return await self._store.summary(session)

    async def compact(self, session: Session, conversation: Conversation, *, run_id: str, user_id: str = "",
                      tool_policy: ToolPolicy | None = None, sender_is_owner: bool = False,
                      payers: tuple[str, ...] = (), users: tuple[str, ...] = ()) -> CompactionResult:
        """Flush memory and summarise the session now (``/compact``, and ``compact_after``). Skipped
        when one is already running for the session; never raises but for cancellation, so run it
        in the session's lane where /stop reaches it. The flush gets exactly the run's tool policy
        (``tool_policy``, ``sender_is_owner``) and its gate (hooks; a call that needs an approval is
        not run: nobody is asked during a flush); its calls and the summary's are charged to ``payers``."""
        workspace = await self._workspaces.prepare(conversation)
        ctx = ToolContext(workspace, conversation, run_id, self.settings.agent_id, user_id, sender_is_owner,
                          tool_policy=tool_policy, payers=payers, gate=self._gate, users=users, unattended=True)
        flush_tools = self.compactor.flush_tools(tool_policy).specs()
        route = (await self.plan(conversation)).route  # the conversation's model summarises it
        result = await self.compactor.using(route).compact(
            session, run_id=run_id, ctx=ctx, agent_id=self.settings.agent_id,
            flush_prompt=lambda: "\n\n".join(self._prompt("minimal", conversation, workspace, route, flush_tools)))
        if result.calls is not None:  # its model calls, for metrics and traces
            await self._events.emit(RunEvent(EventKind.COMPACTION_CALLS, run_id, conversation, trace=result.calls))
        return result

    def may_compact(self, result: RunResult) -> bool:
        """Whether ``compact_after`` could compact after this run (False: it would not)."""
        c = self.settings.compaction
        if not c.enabled or result.status is RunStatus.CANCELLED:
            return False
        return result.live_messages is None or should_compact(result.live_messages, result.prompt_tokens,
                                                               result.route.spec.context_window, c)

    async def compact_after(self, request: RunRequest, result: RunResult) -> CompactionResult | None:
        """After a run: compact when the session passed ``trigger_messages`` live messages
        or its last prompt passed ``trigger_ratio`` of the window; None when not needed."""
        if not self.may_compact(result):
            return None
        if result.live_messages is None and not should_compact(
                await self._store.live_count(request.session), result.prompt_tokens, result.route.spec.context_window,
                self.settings.compaction):
            return None
        return await self.compact(request.session, request.conversation, run_id=f"{request.run_id}-compact",
                                  user_id=request.acting_for, tool_policy=request.tool_policy,
                                  sender_is_owner=request.sender_is_owner, payers=request.payers,
                                  users=request.people)

    async def _emit(self, request: RunRequest, kind: EventKind, text: str = "", *, phase: Phase | None = None,
                    tool: ToolCall | None = None, is_error: bool = False) -> None:
        await self._events.emit(RunEvent(kind, request.run_id, request.conversation, text, phase, tool=tool,
                                         is_error=is_error))
