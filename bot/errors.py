"""The one exception root of chatgate.

ChatgateError
├── ConfigError            a bad or missing config value; names the dotted key and the fix
├── ChannelError           a channel cannot go on (bad token, another instance polling)
├── SendFailed             one send did not land (``bot.channels``): retried by delivery, or given up
├── TransientError         one attempt at a model failed, another may not (``bot.providers``): never
│                          leaves the retry loop
├── StoreError             the database cannot be used
│   ├── StoreCorruptError  the file is not a usable SQLite database
│   └── SchemaTooNewError  the file was written by a newer chatgate
└── ProviderError          an LLM request failed; ``user_message`` is one human sentence
    ├── ProviderAuthError      401/403: the key is wrong or lacks access
    ├── ProviderRequestError   400/404/422: the request was refused
    ├── ContextTooLongError    the prompt does not fit the model's context window
    ├── ProviderBusyError      429/529 beyond the retry budget or Retry-After cap
    └── ProviderUnavailableError  5xx, timeouts and connection errors after retries

Errors meant for users carry a sentence to show them; anything else is a bug and
propagates with its traceback to the logs.
"""

from __future__ import annotations


class ChatgateError(Exception):
    """Root of every error chatgate raises on purpose."""


class ConfigError(ChatgateError):
    """A configuration mistake: ``key: problem (fix)`` in one line."""

    def __init__(self, key: str, problem: str, fix: str | None = None) -> None:
        self.key = key
        self.problem = problem
        self.fix = fix
        line = f"{key}: {problem}" if key else problem
        super().__init__(f"{line} ({fix})" if fix else line)


class ChannelError(ChatgateError):
    """A channel cannot go on; the message says why and what to do, in one line."""


class StoreError(ChatgateError):
    """The store cannot be used."""


class StoreCorruptError(StoreError):
    """The database file is not a usable SQLite database."""


class SchemaTooNewError(StoreError):
    """The database schema is newer than this version of chatgate understands."""


class ProviderError(ChatgateError):
    """An LLM request failed. ``user_message`` is safe to show to the user."""

    user_message = "The language model could not answer just now. Please try again."

    def __init__(self, detail: str, *, user_message: str | None = None, status: int | None = None,
                 provider: str | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.provider = provider
        if user_message is not None:
            self.user_message = user_message


class ProviderAuthError(ProviderError):
    user_message = "The language model refused the API key; the bot's owner needs to fix its configuration."


class ProviderRequestError(ProviderError):
    user_message = "The language model refused this request."


class ContextTooLongError(ProviderRequestError):
    user_message = "This conversation is too long for the model; send /new to start a fresh one."


class ProviderBusyError(ProviderError):
    user_message = "The language model is busy right now; please try again in a minute."


class ProviderUnavailableError(ProviderError):
    user_message = "The language model could not be reached; please try again shortly."
