"""One session's browser: its pages, the last snapshot's references, its downloads, its actions.

Every action is bounded by ``action_timeout`` and most answer with a fresh snapshot (the page's
title, address and accessibility tree with numbered references, ``bot.browser.snapshot``),
headed by what happened meanwhile: requests the fence refused, files downloaded, pages the
site opened or that crashed. Only ``http`` and ``https`` addresses are opened; a page that
ends up anywhere else (``file:``, ``chrome:``, ``data:`` ...) is taken back to ``about:blank``.

A download is saved in the workspace's ``downloads/`` (Chromium writes it there, in its
sandbox, under a random name; it is then given its own name, never overwriting a file).
``abort`` (``/stop``: the tool call was cancelled) closes every page at once, the context and
its cookies stay. With ``profile: per-person`` the context's cookies and storage are kept in
the workspace (``.browser/state.json``) after every action and read when the browser starts.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

from yarl import URL

from bot.browser.config import BrowserSettings
from bot.browser.jail import Jail
from bot.browser.snapshot import Refs, cut, number_refs
from bot.llm import ImagePart
from bot.tools.base import ToolError, ToolOutput
from bot.workspace import create_inside, open_folder_inside

log = logging.getLogger(__name__)

DOWNLOADS = "downloads"
SCREENSHOTS = "screenshots"
PROFILE = ".browser/state.json"
MAX_PROFILE = 5_000_000  # bytes of a kept profile
DOWNLOAD_WAIT = 0.5  # seconds a click waits for a download it may have started
SETTLE = 2.0  # seconds an action waits for the page it changed to load, within the action's time
QUIET = 0.1  # seconds without a change to the document after it loaded: what scripts render late is read too
# resolves once the document has not changed for ``quiet`` ms (at most ``most`` ms): runs in the page
_QUIET_JS = """([quiet, most]) => new Promise(resolve => {
  let timer = null, cap = null;
  const watch = new MutationObserver(() => { clearTimeout(timer); timer = setTimeout(finish, quiet); });
  const finish = () => { watch.disconnect(); clearTimeout(timer); clearTimeout(cap); resolve(); };
  watch.observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
  timer = setTimeout(finish, quiet);
  cap = setTimeout(finish, most);
})"""
_UNSAFE_NAME = re.compile(r"[^\w.\- ()\[\]+,@]")


class BrowserSession:
    """A browser of one session (its own sandbox and context) and what it did since the last answer."""

    def __init__(self, key: str, browser: Any, context: Any, jail: Jail, settings: BrowserSettings,
                 workspace: Path, *, keep_profile: bool) -> None:
        self.key = key
        self.browser = browser
        self.context = context
        self.jail = jail
        self.settings = settings
        self.workspace = workspace
        self.keep_profile = keep_profile
        self.pages: list[Any] = []
        self.current: Any | None = None
        self.refs = Refs()
        self.lock = asyncio.Lock()
        self.used = time.monotonic()
        self.notes: list[str] = []  # told with the next answer
        self._saving: set[asyncio.Task[None]] = set()
        self._downloaded = asyncio.Event()  # a download began since the last click
        self._closing: set[asyncio.Task[Any]] = set()
        context.on("page", self._opened)

    # -- pages -----------------------------------------------------------------------------

    def _opened(self, page: Any) -> None:
        if page in self.pages:
            return
        if len(self.pages) >= self.settings.max_pages:
            self.notes.append(f"the site opened another page; it was closed (at most {self.settings.max_pages} "
                              "pages per chat)")
            self._spawn_close(page)
            return
        page.on("download", self._download)
        page.on("crash", lambda p: self.notes.append(f"the page {p.url} crashed (it may have gone over the "
                                                     "browser's memory limit)"))
        page.set_default_timeout(self.settings.action_timeout * 1000)
        self.pages.append(page)
        self.current = page

    async def _page(self, *, new: bool = False) -> Any:
        self.pages = [p for p in self.pages if not p.is_closed()]
        if self.current is not None and self.current.is_closed():
            self.current = self.pages[-1] if self.pages else None
        if self.current is None or new:
            if len(self.pages) >= self.settings.max_pages:
                raise ToolError(f"{len(self.pages)} pages are open, the most a chat may have; use tab to pick one, "
                                "or open the address in the current page")
            page = await self.context.new_page()
            self._opened(page)
            self.current = page
        return self.current

    def abort(self) -> None:
        """Close every page now (the run was stopped); the context and its cookies stay."""
        pages, self.pages, self.current = self.pages, [], None
        for page in pages:
            self._spawn_close(page)
        self.jail.fence.drop()  # every request in flight ends now, whatever Chromium does with it
        for task in list(self._saving):
            task.cancel()

    def _spawn_close(self, page: Any) -> None:
        task = asyncio.ensure_future(page.close(run_before_unload=False))
        self._closing.add(task)
        task.add_done_callback(self._closed)

    def _closed(self, task: asyncio.Task[Any]) -> None:
        self._closing.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.debug("closing a page of %s failed: %s", self.key, task.exception())

    async def close(self) -> None:
        """Keep the profile when asked, close the browser, end its sandbox."""
        try:
            if self.keep_profile:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(5.0):
                        await self.save_profile()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5.0):
                    await self.browser.close()
        finally:
            await self.jail.close()

    # -- actions ---------------------------------------------------------------------------

    async def open(self, url: str, new_tab: bool) -> str:
        target = check_address(url)
        page = await self._page(new=new_tab)
        await self._navigate(page.goto(str(target), wait_until="domcontentloaded"), target)
        return await self.answer()

    async def click(self, number: int) -> str:
        locator = self._locator(number)
        self._downloaded.clear()
        await self._act(locator.click())
        with contextlib.suppress(TimeoutError):  # a click that starts a download: wait for it a moment
            await asyncio.wait_for(self._downloaded.wait(), DOWNLOAD_WAIT)
        return await self.answer()

    async def type(self, number: int, text: str, submit: bool) -> str:
        locator = self._locator(number)
        await self._act(locator.fill(text))
        if submit:
            await self._act(locator.press("Enter"))
        return await self.answer()

    async def select(self, number: int, option: str) -> str:
        locator = self._locator(number)
        try:
            await self._act(locator.select_option(label=option))
        except ToolError:
            await self._act(locator.select_option(value=option))
        return await self.answer()

    async def scroll(self, down: bool) -> str:
        page = await self._page()
        height = (page.viewport_size or {}).get("height", 720)
        await self._act(page.mouse.wheel(0, height * (0.8 if down else -0.8)))
        return await self.answer()

    async def wait_for(self, text: str) -> str:
        page = await self._page()
        await self._act(page.get_by_text(text).first.wait_for(state="visible"))
        return await self.answer()

    async def back(self) -> str:
        page = await self._page()
        await self._act(page.go_back(wait_until="domcontentloaded"))
        return await self.answer()

    async def tab(self, number: int) -> str:
        self.pages = [p for p in self.pages if not p.is_closed()]
        if not 1 <= number <= len(self.pages):
            raise ToolError(f"there is no page {number}; {len(self.pages)} are open")
        self.current = self.pages[number - 1]
        await self.current.bring_to_front()
        return await self.answer()

    async def screenshot(self) -> ToolOutput:
        page = await self._page()
        data = await self._act(page.screenshot(type="jpeg", quality=75, timeout=self.settings.action_timeout * 1000))
        path = await asyncio.to_thread(self._keep, SCREENSHOTS, f"screenshot-{time.strftime('%Y%m%d-%H%M%S')}.jpg",
                                       data)
        head = await self._head(page)
        return ToolOutput(f"{head}\nThe screenshot is shown to you below and saved as {path} (send_file sends it "
                          "to the chat).", (ImagePart("image/jpeg", base64.b64encode(data).decode("ascii")),))

    # -- what the model reads --------------------------------------------------------------

    async def answer(self) -> str:
        """The current page as text: what happened, its address and title, its numbered snapshot."""
        page = await self._page()
        with contextlib.suppress(Exception):
            await page.wait_for_load_state("load", timeout=SETTLE * 1000)
        with contextlib.suppress(Exception):  # a page that navigates meanwhile, or whose scripts never yield
            await asyncio.wait_for(page.evaluate(_QUIET_JS, [QUIET * 1000, SETTLE * 1000]), SETTLE + 0.5)
        await self._settle_downloads()
        if not _allowed_scheme(page.url):
            self.notes.append(f"the page went to {page.url[:100]}, which is not opened here (only http and https); "
                              "it was taken back to about:blank")
            await self._act(page.goto("about:blank"))
        head = await self._head(page)
        try:
            raw = await self._act(page.aria_snapshot(mode="ai", timeout=self.settings.action_timeout * 1000))
        except ToolError as exc:
            return f"{head}\n(no snapshot: {exc})"
        text, self.refs = number_refs(raw)
        if self.keep_profile:
            await self.save_profile()
        return f"{head}\n{cut(text, self.settings.snapshot_chars)}"

    async def _head(self, page: Any) -> str:
        title = ""
        with contextlib.suppress(Exception):
            title = await page.title()
        lines = [f"Page {self.pages.index(page) + 1 if page in self.pages else 1} of {max(1, len(self.pages))}: "
                 f"{title or '(no title)'} <{page.url}>"]
        refused = self.jail.fence.take_refusals()
        if refused:
            lines.append("Refused by the address fence (not loaded): "
                         + "; ".join(f"{r.target} ({r.why})" for r in refused[-5:]))
        lines += [f"Note: {n}" for n in self.notes]
        self.notes.clear()
        return "\n".join(lines)

    def _locator(self, number: int) -> Any:
        if self.current is None or self.current.is_closed():
            raise ToolError("no page is open; open an address first")
        found = self.refs.target(number)
        if found is None:
            raise ToolError(f"there is no element [{number}] in the last snapshot; take a snapshot and use its numbers")
        return self.current.locator(f"aria-ref={found[0]}")

    async def _act(self, step: Any) -> Any:
        """One Playwright call; its failure as a sentence the model reads."""
        from playwright.async_api import Error as PlaywrightError

        try:
            return await step
        except PlaywrightError as exc:
            message = str(exc).split("\n")[0].removeprefix("Error: ")
            if "aria-ref" in message or "not found" in message.lower():
                message += " (the page changed since the snapshot: take a snapshot again)"
            raise ToolError(message[:500]) from None

    async def _navigate(self, step: Any, target: URL) -> None:
        try:
            await self._act(step)
        except ToolError:
            refused = list(self.jail.fence.refusals)
            if refused:
                self.notes.append("; ".join(f"refused {r.target}: {r.why}" for r in refused[-3:]))
                self.jail.fence.refusals.clear()
                raise ToolError(f"{target} was not opened: {self.notes.pop()}") from None
            raise

    # -- files -------------------------------------------------------------------------------

    def _download(self, download: Any) -> None:
        self._downloaded.set()
        task = asyncio.ensure_future(self._save_download(download))
        self._saving.add(task)
        task.add_done_callback(self._saving.discard)

    async def _save_download(self, download: Any) -> None:
        name = download.suggested_filename or "download"
        try:
            path = await download.path()  # in the workspace's downloads/, under Playwright's random name
            final = await asyncio.to_thread(self._rename, Path(path), name)
            self.notes.append(f"downloaded {final} ({os.path.getsize(self.workspace / final):,} bytes)")
        except Exception as exc:  # noqa: BLE001 - a failed download is told, not raised
            self.notes.append(f"the download of {name} failed: {exc}")

    async def _settle_downloads(self) -> None:
        if self._saving:
            await asyncio.wait(set(self._saving), timeout=self.settings.action_timeout)

    def _rename(self, path: Path, name: str) -> str:
        """The downloaded file under its own name in ``downloads/`` (never over another file)."""
        folder_fd, _ = open_folder_inside(self.workspace, DOWNLOADS, create=True)
        try:
            if Path(os.path.realpath(path)).parent != Path(os.path.realpath(f"/proc/self/fd/{folder_fd}")):
                raise OSError("the download is not in the workspace's downloads folder")
            for candidate in _names(safe_name(name)):
                try:
                    os.link(path.name, candidate, src_dir_fd=folder_fd, dst_dir_fd=folder_fd, follow_symlinks=False)
                except FileExistsError:
                    continue
                os.unlink(path.name, dir_fd=folder_fd)
                return f"{DOWNLOADS}/{candidate}"
            raise OSError("no free name")
        finally:
            os.close(folder_fd)

    def _keep(self, folder: str, name: str, data: bytes) -> str:
        for candidate in _names(name):
            try:
                fd, relative = create_inside(self.workspace, f"{folder}/{candidate}", 0o600)
            except FileExistsError:
                continue
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            return relative
        raise ToolError(f"cannot save {name} in {folder}/")

    async def save_profile(self) -> None:
        state = await self.context.storage_state()
        await asyncio.to_thread(self._write_profile, json.dumps(state).encode())

    def _write_profile(self, data: bytes) -> None:
        folder_fd, _ = open_folder_inside(self.workspace, ".browser", create=True)
        try:
            fd = os.open("state.json.new", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600, dir_fd=folder_fd)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace("state.json.new", "state.json", src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
        finally:
            os.close(folder_fd)


def read_profile(workspace: Path) -> dict[str, Any] | None:
    """A kept profile (cookies and storage), or None."""
    from bot.workspace import read_inside

    try:
        data = read_inside(workspace, PROFILE, MAX_PROFILE)
        found = json.loads(data)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def check_address(url: str) -> URL:
    """An ``http``/``https`` address to open; ``ToolError`` for any other (file:, data:, chrome: ...)."""
    try:
        target = URL(url.strip())
    except ValueError:
        raise ToolError(f"{url[:200]} is not a valid address") from None
    if not target.scheme and not url.strip().startswith("/"):
        target = URL(f"https://{url.strip()}")
    if target.scheme not in ("http", "https") or not target.host:
        raise ToolError(f"only http and https addresses are opened, not {url[:100]}")
    return target


def _allowed_scheme(url: str) -> bool:
    return url == "about:blank" or url.startswith(("http://", "https://"))


def safe_name(name: str) -> str:
    """A file name without folders, control characters or a leading dot."""
    base = _UNSAFE_NAME.sub("_", name.replace("\\", "/").rsplit("/", 1)[-1]).strip(" .")
    return (base or "download")[:120]


def _names(name: str) -> list[str]:
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        stem, ext = name, ""
    return [name, *(f"{stem} ({n}){'.' + ext if ext else ''}" for n in range(1, 100))]
