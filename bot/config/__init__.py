"""One YAML file -> typed, validated, frozen config, checked before anything starts.

This package is the machinery and the core's keys; the file's whole model, with a section
per registered channel, is assembled by the composition root (``bot.settings``: ``Config``
and ``load_config``), since the channels' models come from the channel registry and the
registry's platform packages build their models on this package. Every mistake raises
``ConfigError`` as one line naming the dotted key and the fix; only the first is reported.

Secrets are ``SecretStr``: their repr is masked, ``describe()`` shows at most the ends.
``load`` insists on the secrets that will be used; a config built in code (tests) does not.
The package imports only pydantic and PyYAML; it runs at every start.

- ``types``: field types, secrets, ``Section``, what every channel's section is
  (``ChannelSection``) and the base of every platform's (``ChannelConfig``)
- ``schema``: the core sections, ``CoreConfig`` (all but the platforms' sections)
- ``loading``: YAML, ``${VAR}``, secrets from the environment, ``load``
- ``wording``: pydantic errors as one line naming the key and the fix

Importing the package imports only ``types``: a platform's config model, built on it through
the port, loads no YAML and no core section.
"""

from bot.config.types import AccessConfig, CapabilitySection, Section

__all__ = ["AccessConfig", "CapabilitySection", "Section"]
