#!/usr/bin/env python3
"""Renders every collected chat template (templates/*.jinja) for every conversation (conversations.json), and the
feature snippets of snippets.json (expected/snippet.<name>), the way
Hugging Face transformers' apply_chat_template does (Jinja2's ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks and loopcontrols; tojson with ensure_ascii off; raise_exception; strftime_now), writing
expected/<template>.<conversation>.txt, or .error with the exception's message when the template refuses the
conversation (a message starting with '!' when Python failed otherwise: then only a failure is due). These are the renderings kvserve's Jinja engine must reproduce byte for byte
(tests/jinja/chat_templates_test.cpp).

  tests/jinja/render_with_jinja2.py           # writes expected/
  tests/jinja/render_with_jinja2.py --check   # exits 1 when expected/ differs from what Jinja2 renders now
"""
import datetime
import json
import pathlib
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = pathlib.Path(__file__).resolve().parent
# strftime_now's clock, fixed so that renderings are reproducible (the C++ test passes the same instant).
NOW = datetime.datetime(2024, 7, 26, 12, 0, 0)


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)
    return env


def render_all():
    env = environment()
    tokens = json.loads((HERE / "templates.json").read_text())
    conversations = json.loads((HERE / "conversations.json").read_text())
    out = {}
    for path in sorted((HERE / "templates").glob("*.jinja")):
        template = env.from_string(path.read_text())
        for name, conversation in conversations.items():
            key = f"{path.stem}.{name}"
            try:
                out[key + ".txt"] = template.render(
                    messages=conversation["messages"], tools=conversation.get("tools"), documents=None,
                    add_generation_prompt=conversation.get("add_generation_prompt", True), **tokens[path.stem])
            except jinja2.exceptions.TemplateError as e:  # raise_exception: the message must be the same
                out[key + ".error"] = str(e)
            except Exception as e:  # the template fails on this conversation some other way: an error is due
                out[key + ".error"] = f"!{type(e).__name__}: {e}"
    snippets = json.loads((HERE / "snippets.json").read_text())
    for name, spec in snippets.items():
        key = f"snippet.{name}"
        try:
            out[key + ".txt"] = env.from_string(spec["template"]).render(**spec["variables"])
        except jinja2.exceptions.TemplateError as e:
            out[key + ".error"] = str(e)
        except Exception as e:
            out[key + ".error"] = f"!{type(e).__name__}: {e}"
    return out


def main():
    rendered = render_all()
    expected = HERE / "expected"
    if "--check" in sys.argv:
        have = {p.name: p.read_text() for p in expected.iterdir()}
        if have != rendered:
            changed = sorted(set(have) ^ set(rendered) | {k for k in have.keys() & rendered.keys() if have[k] != rendered[k]})
            print("expected/ differs from Jinja2's renderings:", ", ".join(changed))
            return 1
        print(f"{len(rendered)} renderings agree with Jinja2 {jinja2.__version__}")
        return 0
    expected.mkdir(exist_ok=True)
    for p in expected.iterdir():
        p.unlink()
    for name, text in rendered.items():
        (expected / name).write_text(text)
    print(f"wrote {len(rendered)} renderings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
