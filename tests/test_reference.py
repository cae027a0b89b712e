"""The configuration reference (docs/reference/configuration.md) is what the generator writes from
the config models and config.example.yaml's comments, and the example shows every key of the models
with the models' default: the reference, the example and `chatgate check` read one set of models."""

from __future__ import annotations

from bot.setup import reference
from bot.setup.notes import read


def test_the_committed_reference_is_current() -> None:
    page, _ = reference.generate()
    assert reference.OUTPUT.read_text(encoding="utf-8") == page, "run: python -m bot.setup.reference"


def test_the_example_shows_every_key_with_its_default() -> None:
    _, problems = reference.generate()
    assert problems == [], "config.example.yaml disagrees with the models:\n" + "\n".join(problems)


def test_every_key_has_a_description() -> None:
    from bot.settings import Config

    notes = read(reference.EXAMPLE.read_text(encoding="utf-8"))
    known = {k.path for k in reference.keys(Config)}
    bare = [".".join(k.path) for k in reference.keys(Config)
            if not k.section and not reference.description(Config, k, notes, known)]
    assert bare == [], "add a comment in config.example.yaml (or the model) for: " + ", ".join(bare)


def test_the_example_is_read_as_a_person_reads_it() -> None:
    notes = read("""\
storage:
  path: data/x.db                # the file
                                 # (more about it)
  # url: postgresql://h/db       # instead of the file
  pool: 3
models:
  switch: owners
#  fast:                         # a name
#    model: m1                   # its id
hooks:
  pre_tool: []
    # - tools: [exec]            # which
    #   run: 'echo "a # b"'      # what
    #                            # (and more)
    #   timeout: 10
""")
    assert notes[("storage", "path")].text == ["the file", "(more about it)"]
    assert notes[("storage", "path")].shown == "data/x.db"
    assert notes[("storage", "url")].live is False and notes[("storage", "url")].text == ["instead of the file"]
    assert notes[("storage", "pool")].shown == 3
    assert notes[("models", "fast", "model")].text == ["its id"]
    assert notes[("hooks", "pre_tool", "[]", "run")].text == ["what", "(and more)"]
    assert notes[("hooks", "pre_tool", "[]", "timeout")].text == []
