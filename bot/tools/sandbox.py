"""Where ``exec`` runs: a bubblewrap sandbox (the default) or, when chosen, the bare host.

Under bubblewrap (``tools.exec.sandbox: bwrap``) a command sees:

- its workspace, read-write, at ``/workspace`` (the cwd and ``HOME``): the only writable path
  apart from a private, empty ``/tmp``; the host path of the workspace is not shown;
- the system read-only: ``/usr`` (with ``/bin``, ``/sbin``, ``/lib*`` as the host has them)
  and an allowlist of ``/etc`` entries a shell and common tools need (``ETC_ALLOWED``:
  users, libraries, time zone, certificates, name resolution). Not the rest of ``/etc``
  (no ``shadow``, no ssh keys, no ``/etc/ssl/private``, no config file of ours that lives there),
  not ``/home``, ``/root``, ``/var``, ``/srv``, ``/opt``, ``/run``, ``/mnt`` or ``/app``: the bot's config,
  database and other workspaces are simply not in its world. A private path that happens
  to lie under a bound directory (``ExecSettings.private``: the config file, the data folder,
  the workspace root, the dashboard's TLS certificate and key) is covered up as well;
- a fresh pid namespace with its own ``/proc`` (the bot's process and its environment are
  not visible), a minimal ``/dev``, no network unless ``tools.exec.network: true``, new
  ipc/uts/cgroup namespaces, no capabilities, its own session (no terminal to steal);
- bounds on processes, memory, file size and ``/tmp`` (``tools.exec.limits``; see
  ``bot.tools.bounds``): ``/tmp`` is a tmpfs of ``tmp_mb``, the rest is applied by the caller
  while the sandbox waits on ``--block-fd`` before it starts the command;
- a clean environment: ``PATH``, ``HOME=/workspace`` and ``LANG``, nothing inherited;
  bwrap itself is started with that environment too, because bwrap's own init process is
  pid 1 in the sandbox and its ``/proc/1/environ`` is readable there; its options come
  through ``--args FD``, so its ``/proc/1/cmdline`` shows no host path either.

The whole sandbox dies with its pid 1: bwrap reports that process's host pid on
``--info-fd`` and killing it makes the kernel kill every process of the namespace,
``setsid`` children included. ``--die-with-parent`` does the same if the bot dies.

``tools.exec.sandbox: none`` runs ``/bin/sh`` directly with the workspace as cwd: the command
can read whatever the bot's user can (its config file, database, other workspaces, the
network). It exists for hosts where user namespaces are unavailable and must be chosen
explicitly; ``chatgate check`` warns about it.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bot.config.tools import ExecLimitsConfig
from bot.errors import ConfigError
from bot.tools.bounds import MB, unenforced

log = logging.getLogger(__name__)

SandboxMode = Literal["bwrap", "none"]
SANDBOX_WORKSPACE = "/workspace"
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The top-level directories that are either a link into /usr (merged /usr) or a directory
# of system binaries and libraries; bound read-only as the host has them.
SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What of /etc a shell, Python, git and curl need; nothing that holds a secret: of /etc/ssl and
# /etc/pki the certificates and OpenSSL's settings, never their private/ folders of keys.
ETC_ALLOWED = (
    "passwd", "group", "nsswitch.conf", "host.conf", "hosts", "resolv.conf", "gai.conf", "protocols",
    "services", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "alternatives",
    "ssl/certs", "ssl/cert.pem", "ssl/openssl.cnf", "ca-certificates", "ca-certificates.conf",
    "pki/tls/certs", "pki/tls/cert.pem", "pki/tls/openssl.cnf", "pki/ca-trust", "mime.types", "magic", "magic.mime",
    "os-release", "debian_version", "lsb-release", "alpine-release", "issue", "terminfo", "inputrc",
    "environment", "locale.alias", "locale.conf", "default", "profile", "shells", "bash.bashrc",
    "gitconfig", "wgetrc", "python3", "python3.11", "python3.12", "python3.13", "perl", "fonts",
)
_PIPE_SAFE = 60_000  # bytes: under the smallest pipe buffer Linux gives (64 KiB)
PROBE_TIMEOUT = 10.0  # seconds for the start-up check that bubblewrap can build a sandbox
FIX = ("install bubblewrap (apt-get install bubblewrap) and let it create namespaces, "
       "or set tools.exec.sandbox: none to run commands unconfined")


@dataclass(frozen=True, slots=True)
class ExecSettings:
    """How the exec tool runs commands (``tools.exec`` in the config)."""

    sandbox: SandboxMode = "bwrap"
    network: bool = False  # only under bwrap: ``none`` cannot take the network away
    owners_only: bool = True
    private: tuple[Path, ...] = ()  # the bot's config file, database, workspace root, TLS files: never shown
    bwrap: str = "bwrap"  # the executable, looked up on PATH
    limits: ExecLimitsConfig = ExecLimitsConfig()
    writable: bool = True  # the folder at /workspace may be written (a pre-tool hook's scratch folder: no)


def clean_environment(home: str, lang: str | None = None) -> dict[str, str]:
    """The only environment a sandboxed command (and bwrap itself) gets."""
    return {"PATH": SANDBOX_PATH, "HOME": home, "LANG": lang or "C.UTF-8"}


def bwrap_arguments(workspace: Path, settings: ExecSettings, *, info_fd: int | None = None,
                    block_fd: int | None = None, root: Path = Path("/"),
                    read_only: Sequence[tuple[int, str]] = (), also: Sequence[Path] = (),
                    environment: bool = True) -> list[str]:
    """bwrap's options for one command in ``workspace`` (without the executable and the command).

    ``read_only`` names files of the workspace bound read-only over themselves (the persona
    and rule files of a group, for a sender who is not an owner). With ``block_fd`` the
    sandbox waits, built, until a byte can be read there (the caller bounds it meanwhile,
    ``bot.tools.bounds``); ``info_fd`` gets the host pid of its pid 1. ``root`` is where the
    host's directories are looked up (a test points it elsewhere). ``also`` are more host
    folders shown read-only where they are (an MCP server's interpreter); ``environment``
    False keeps the environment bwrap is started with (an MCP server's, secrets included, which
    must not go on a command line) and only sets ``HOME``."""
    args = ["--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL"]
    if settings.network:
        args.append("--share-net")
    for top in SYSTEM_DIRS:
        host = root / top.lstrip("/")
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), top]
        elif host.is_dir():
            args += ["--ro-bind", str(host), top]
    args += ["--ro-bind", str(root / "usr"), "/usr"]
    for name in ETC_ALLOWED:
        host = root / "etc" / name
        if host.exists():  # a dangling link is left out
            args += ["--ro-bind", str(host), f"/etc/{name}"]
    args += _masks(settings.private, root)
    args += ["--proc", "/proc", "--dev", "/dev"]
    if settings.limits.tmp_mb is not None:
        args += ["--size", str(settings.limits.tmp_mb * MB)]  # applies to the next --tmpfs
    args += ["--tmpfs", "/tmp", "--bind" if settings.writable else "--ro-bind", str(workspace), SANDBOX_WORKSPACE]
    for fd, name in read_only:  # bound by descriptor: a link swapped in since it was opened changes nothing
        args += ["--ro-bind-fd", str(fd), f"{SANDBOX_WORKSPACE}/{name}"]
    for folder in also:
        args += ["--ro-bind", str(folder), str(folder)]
    if also:
        args += _masks(settings.private, root, also)  # over what these folders showed of them
    args += ["--remount-ro", "/", "--chdir", SANDBOX_WORKSPACE]
    if environment:
        args.append("--clearenv")
        for name, value in clean_environment(SANDBOX_WORKSPACE, os.environ.get("LANG")).items():
            args += ["--setenv", name, value]
    else:
        args += ["--setenv", "HOME", SANDBOX_WORKSPACE]
    if info_fd is not None:
        args += ["--info-fd", str(info_fd)]
    if block_fd is not None:
        args += ["--block-fd", str(block_fd)]
    return args


def _masks(private: Iterable[Path], root: Path, also: Sequence[Path] = ()) -> list[str]:
    """Cover private paths that lie under something bound read-only (e.g. a config in /usr/local);
    with ``also``, those under these folders."""
    if also:
        bound = [root / f.relative_to("/") for f in also]
    else:
        bound = [root / "usr", *(root / "etc" / name for name in ETC_ALLOWED)]
        bound += [root / d.lstrip("/") for d in SYSTEM_DIRS if (root / d.lstrip("/")).is_dir()
                  and not (root / d.lstrip("/")).is_symlink()]
    args: list[str] = []
    for path in private:
        real = Path(os.path.realpath(path))
        if not real.exists():
            continue
        for top in bound:
            top_real = Path(os.path.realpath(top))
            if real == top_real or top_real in real.parents:
                inside = "/" + str(real.relative_to(root)) if root != Path("/") else str(real)
                args += ["--tmpfs", inside] if real.is_dir() else ["--ro-bind", "/dev/null", inside]
                break
    return args


def sandbox_command(workspace: Path, settings: ExecSettings, argv: Sequence[str], *, info_fd: int, block_fd: int,
                    read_only: Sequence[tuple[int, str]]) -> tuple[list[str], int | None]:
    """The full command line (bwrap, its options, ``--``, then ``argv``) and the read end of a
    pipe that holds the options, to pass to the child; the caller closes it after the spawn.

    The options go through ``--args FD`` so that the sandbox's ``/proc/1/cmdline`` (bwrap's
    own init) shows neither the host path of the workspace nor the paths covered up."""
    options = bwrap_arguments(workspace, settings, info_fd=info_fd, block_fd=block_fd, read_only=read_only)
    data = b"".join(option.encode("utf-8", "surrogateescape") + b"\0" for option in options)
    if len(data) > _PIPE_SAFE:  # would not fit the pipe before bwrap reads it: on the command line
        return [settings.bwrap, *options, "--", *argv], None
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, data)
    finally:
        os.close(write_end)
    return [settings.bwrap, "--args", str(read_end), "--", *argv], read_end


def require_sandbox(settings: ExecSettings, *, key: str = "tools.exec.sandbox") -> None:
    """At start-up, when exec is on: bubblewrap must be installed and able to build the sandbox.

    Raises ``ConfigError`` (one line naming ``tools.exec.sandbox`` and the fix) otherwise, so
    a missing or crippled bubblewrap stops start-up instead of failing every command. A bound
    of ``tools.exec.limits`` that this host cannot enforce is logged as a warning."""
    for missing in unenforced(settings.limits, sandboxed=settings.sandbox == "bwrap"):
        log.warning("exec: cannot enforce %s", missing)
    if settings.sandbox != "bwrap":
        return
    found = shutil.which(settings.bwrap)
    if found is None:
        raise ConfigError(key, "bwrap (bubblewrap) is not installed", FIX)
    try:
        with tempfile.TemporaryDirectory(prefix="chatgate-probe-") as probe:
            argv = [found, *bwrap_arguments(Path(probe), settings), "--", "/bin/sh", "-c", "exit 0"]
            done = subprocess.run(argv, env=clean_environment(SANDBOX_WORKSPACE), stdin=subprocess.DEVNULL,
                                  capture_output=True, timeout=PROBE_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(key, f"bwrap could not be run ({exc})", FIX) from None
    if done.returncode != 0:
        reason = " ".join(done.stderr.decode(errors="replace").split())[:200] or f"exit code {done.returncode}"
        if "--size" in reason:  # an old bubblewrap cannot bound a tmpfs
            raise ConfigError(key, f"this bubblewrap cannot bound the sandbox's /tmp: {reason}",
                              "install a bubblewrap that has --size (Debian 12's 0.8 has), "
                              "or set tools.exec.limits.tmp_mb: null")
        hint = ("let the container create namespaces (docker run --security-opt seccomp=unconfined "
                "--security-opt apparmor=unconfined; see the README), or set tools.exec.sandbox: none")
        raise ConfigError(key, f"bubblewrap cannot build its sandbox here: {reason}", hint)
    log.debug("bubblewrap sandbox available: %s", found)
