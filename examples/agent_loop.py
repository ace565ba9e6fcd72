"""A minimal agent loop wired to Mindfile's memory tools, with a scripted model stand-in.

Run it (offline, no API key)::

    python examples/agent_loop.py            # a throw-away store in a temp dir
    python examples/agent_loop.py agent.db   # or keep the store

``ScriptedModel`` plays the LLM: it answers in the OpenAI chat format, emitting the tool
calls a real model would. Swap it for a real client (``client.chat.completions.create(
model=..., messages=messages, tools=tool_schemas("openai"))``) and the loop stays the same.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mindfile
from mindfile.tools import dispatch, tool_schemas

Message = dict[str, Any]
Step = Callable[[list[Message]], Message]


def tool_call(*calls: tuple[str, dict[str, Any]]) -> Step:
    """A scripted assistant turn that calls tools (arguments as JSON text, like models)."""

    def step(messages: list[Message]) -> Message:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{len(messages)}_{i}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for i, (name, args) in enumerate(calls)
            ],
        }

    return step


def say(text: Callable[[list[Message]], str] | str) -> Step:
    """A scripted final answer; it may read the tool results in ``messages``."""
    return lambda messages: {
        "role": "assistant",
        "content": text(messages) if callable(text) else text,
    }


def clip(text: str, limit: int = 110) -> str:
    """Shorten ``text`` for printing."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def last_result(messages: list[Message]) -> Any:
    """The result of the most recent tool call."""
    return json.loads(next(m for m in reversed(messages) if m["role"] == "tool")["content"])


class ScriptedModel:
    """Stands in for an LLM: replays a fixed script of assistant turns."""

    def __init__(self, script: list[Step]) -> None:
        self.script = list(script)

    def chat(self, messages: list[Message], tools: list[dict[str, Any]]) -> Message:
        assert tools, "a real model would be given the tool definitions"
        return self.script.pop(0)(messages)


def run_turn(
    mem: mindfile.Mindfile, model: ScriptedModel, user_text: str, *, user_id: str, session_id: str
) -> str:
    """One user turn: call the model until it answers without tools."""
    tools = tool_schemas("openai")
    messages: list[Message] = [
        {"role": "system", "content": "You are a helpful assistant with long-term memory."},
        *(r.payload for r in mem.recall(session_id)),
    ]

    def log(message: Message) -> None:
        messages.append(message)
        last = mem.recall(session_id, limit=1)
        mem.store(session_id, last[0].sequence + 1 if last else 1, message)

    print(f"\nuser> {user_text}")
    log({"role": "user", "content": user_text})
    while True:
        reply = model.chat(messages, tools)
        log(reply)
        if not reply.get("tool_calls"):
            print(f"assistant> {reply['content']}")
            return str(reply["content"])
        for call in reply["tool_calls"]:
            name, arguments = call["function"]["name"], call["function"]["arguments"]
            result = dispatch(mem, name, arguments, user_id=user_id, session_id=session_id)
            shown = result["result"] if result["ok"] else {"error": result["error"]}
            print(f"  tool {name}({clip(arguments)}) -> {clip(json.dumps(shown))}")
            log({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})


def suggest_snack(messages: list[Message]) -> str:
    """The scripted answer after ``memory_search``: it uses what memory returned."""
    found = last_result(messages)["result"]["results"]
    note = next(r for r in found if r["kind"] == "note")
    return f"Remembering '{note['text']}', I'd suggest apple slices, not peanut butter."


def confirm_move(messages: list[Message]) -> str:
    """The scripted answer after ``fact_get`` with history."""
    result = last_result(messages)["result"]
    before = result["history"][0]["value"]
    return f"Updated: you live in {result['fact']['value']} now (before: {before})."


def main(path: str) -> None:
    """Three user turns over two sessions, then a look at what was stored."""
    user = "alice"
    lisbon = {"category": "home", "key": "city", "value": "Lisbon", "source": "user"}
    porto = {**lisbon, "value": "Porto"}
    model = ScriptedModel(
        [
            # Session 1: the user shares things worth remembering.
            tool_call(
                ("memory_save", {"content": "Alice is allergic to peanuts.", "tags": ["health"]}),
                ("fact_set", lisbon),
            ),
            # A call over a limit: the model gets a structured error it can act on...
            tool_call(("scratchpad_write", {"items": ["x" * 300]})),
            # ...and corrects itself.
            tool_call(("scratchpad_write", {"items": ["goal: plan Alice's trip", "next: book"]})),
            say("Got it - I'll remember your allergy and that you live in Lisbon."),
            # Session 2, later: nothing in the prompt, so the model searches its memory.
            tool_call(("memory_search", {"query": "food the user must avoid"})),
            say(suggest_snack),
            tool_call(("fact_set", porto)),
            tool_call(("fact_get", {"category": "home", "key": "city", "include_history": True})),
            say(confirm_move),
        ]
    )
    with mindfile.open(path) as mem:
        first = "I'm allergic to peanuts, and I live in Lisbon."
        run_turn(mem, model, first, user_id=user, session_id="session-1")
        run_turn(mem, model, "Can you suggest a snack?", user_id=user, session_id="session-2")
        run_turn(mem, model, "By the way, I moved to Porto.", user_id=user, session_id="session-2")
        print("\nnotes:", [n.content for n in mem.list_notes("memory:alice")])
        pad = mem.read_scratchpad("session-1")
        print("scratchpad of session-1:", [] if pad is None else list(pad.items))
        # Before the next prompt: keep session-2 inside a 500-token budget.
        ctx = mem.summarize("session-2", token_budget=500)
        print(
            f"\nsession-2 for a 500-token prompt: {ctx.condensed} messages folded into the "
            f"rolling summary; the context is now {len(ctx.messages)} messages, {ctx.tokens} tokens"
        )
        print(ctx.messages[0]["content"])


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(str(Path(tmp) / "agent.db"))
