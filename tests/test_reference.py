"""config.example.yaml and the configuration reference (docs/reference/configuration.md) are what
the generator writes from the config models, the one source of every key's type, default,
description and samples; the example loads, `chatgate check`s, and its samples are valid keys."""

from __future__ import annotations

import typing

import pytest
import yaml
from pydantic import TypeAdapter

from bot import cli
from bot.settings import Config, load_config
from bot.setup import reference
from bot.setup.example import block, comment, flow, sample_lines
from bot.setup.keys import Key, extra, keys, model_of, plain

REGENERATE = "not what the models say: run `python -m bot.setup.reference` and commit both files"


def test_the_committed_example_and_reference_are_current() -> None:
    stale = [path.name for path, text in reference.generate().items()
             if not path.is_file() or path.read_text(encoding="utf-8") != text]
    assert stale == [], f"{', '.join(stale)}: {REGENERATE}"
    assert reference.main(["--check"]) == 0


def test_the_example_loads_as_the_defaults_and_checks(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-example-0123456789abcdef")
    example = load_config(reference.EXAMPLE)
    assert example.model_dump() == load_config().model_dump()
    assert cli.main(["check", "-c", str(reference.EXAMPLE)]) == 0
    shown = capsys.readouterr()
    assert "gpt-4o-mini" in shown.out and "sk-example" not in shown.out and shown.err == ""


def test_every_key_has_a_description() -> None:
    bare = [".".join(k.path) for k in keys(Config) if not k.description and not k.section]
    assert bare == [], "give these keys a Field(description=...) on their model: " + ", ".join(bare)


def test_a_sections_own_words_name_its_keys() -> None:
    """``json_schema_extra["descriptions"]`` (a platform's words for an inherited key) names real keys."""
    seen: set[type] = set()

    def walk(model: type) -> None:
        if model in seen:
            return
        seen.add(model)
        own = extra(model).get("descriptions", {})
        assert set(own) <= set(model.model_fields), f"{model.__name__}: {set(own) - set(model.model_fields)}"
        for field in model.model_fields.values():
            for arg in [field.annotation, *typing.get_args(field.annotation)]:
                if (sub := model_of(arg)) is not None:
                    walk(sub)

    walk(Config)
    assert len(seen) > 40


def _validate(key: Key, value: object) -> None:
    if key.named:  # models.<name>: entries of the model holding them
        parent = Config.model_fields[key.path[0]].annotation
        parent.model_validate(value)
    else:
        TypeAdapter(key.annotation).validate_python(value)


def test_every_sample_is_a_valid_value_and_reads_back_from_its_yaml() -> None:
    samples = [k for k in keys(Config) if k.examples]
    assert {".".join(k.path) for k in samples} >= {
        "channels.telegram.groups", "dashboard.users", "mcp.servers", "models.<name>", "storage.url",
        "hooks.pre_tool", "tools.approval", "agent.identity_links", "pricing"}
    for key in samples:
        _validate(key, key.examples[0])
        text = "\n".join(code for code, _ in sample_lines(key))
        read = yaml.safe_load(text)
        expected = plain(key.examples[0]) if key.named else {key.path[-1]: plain(key.examples[0])}
        assert read == expected, text


def test_the_reference_shows_samples_as_yaml_blocks_not_run_together() -> None:
    page = reference.OUTPUT.read_text(encoding="utf-8")
    for name in ("channels.telegram.groups", "dashboard.users"):
        after = page.split(f"`{name}`, for example:\n\n```yaml\n", 1)[1].split("```", 1)[0]
        key = next(k for k in keys(Config) if ".".join(k.path) == name)
        assert yaml.safe_load(after) == {key.path[-1]: plain(key.examples[0])}
    assert "# viewer (default)" not in page and "tools: {allow: [read_file" not in page.split("## ")[1]


@pytest.mark.parametrize(("value", "shown"), [
    ("off", "'off'"), ("${OPENAI_API_KEY}", "${OPENAI_API_KEY}"), (("127.0.0.0/8", "::1"), "[127.0.0.0/8, '::1']"),
    (None, "null"), ({}, "{}"), (120.0, "120.0"), ("", "''"), ("*", "'*'"),
])
def test_a_value_is_written_as_yaml_reads_it(value: object, shown: str) -> None:
    assert flow(value) == shown
    assert yaml.safe_load(shown) == plain(value)


def test_comments_line_up_and_wrap_under_their_key() -> None:
    text = "one two three " * 10
    lines = comment("  key: 1", text.strip())
    assert lines[0].startswith("  key: 1" + " " * 25 + "# one")
    assert all(line.index("#") == 33 and len(line) <= 100 for line in lines)
    commented = comment("  # key: 1", "a b " * 40, "  # ")
    assert len(commented) > 1 and all(line.startswith("  # ") and line.index("#", 3) == 33 for line in commented)
    assert commented[1].startswith("  #" + " " * 30 + "# ")  # "  #", then the comment's next line lined up
    long = comment("  # url: postgresql://user:${PGPASSWORD}@db.internal:5432/chatgate", "where it is")
    assert long[1] == " " * 33 + "# where it is"  # a long line's comment goes under it


def test_a_sample_describes_a_models_keys_once() -> None:
    from bot.config.named import NamedModelConfig

    lines = block({"a": {"provider": "openai", "model": "m"}, "b": {"provider": "openai", "model": "n"}},
                  ("map", NamedModelConfig))
    assert [code for code, _ in lines] == ["a:", "  provider: openai", "  model: m", "b:", "  provider: openai",
                                           "  model: n"]
    assert [bool(text) for _, text in lines] == [False, True, True, False, False, False]
