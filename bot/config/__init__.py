"""One YAML file -> typed, validated, frozen config, checked before anything starts.

This package is the machinery and the core's keys; the file's whole model, with a section
per registered channel and capability, is assembled by the composition root (``bot.settings``:
``Config`` and ``load_config``), since those models come from the registries, whose packages
build them on this package. Every mistake raises ``ConfigError`` as one line naming the dotted
key and the fix; only the first is reported.

Secrets are ``SecretStr``: their repr is masked, ``describe()`` shows at most the ends.
``load`` insists on the secrets that will be used; a config built in code (tests) does not.

- ``types``: field types, secrets, ``Section``, the bases of the channels' and capabilities' sections
- ``schema``: the core sections (some in ``named``, ``storage``, ``tools``), ``CoreConfig``
- ``loading``: YAML, ``${VAR}`` (and ``dotenv``), secrets from the environment, ``load``
- ``keys``, ``wording``: where a key is; pydantic errors as one line naming the key and the fix

Importing the package imports only ``types``: a platform's config model, built on it through
the port, loads no YAML and no core section.
"""

from bot.config.types import AccessConfig, CapabilitySection, Section

__all__ = ["AccessConfig", "CapabilitySection", "Section"]
