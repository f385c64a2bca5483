"""The simulated model: a deterministic answer and token usage for a `Prompt`.

The answer is seeded by the prompt's digest (sha256, so it is the same in
every process, unlike `hash()`), mentions words of the last user message, and
is cut at the requested max tokens. A request that names a JSON schema
(structured outputs: `response_format` or `text.format`, what the SDKs'
`parse()` sends) is answered with a JSON object of that schema, its string
fields holding the answer.

Tool calls follow the instructions, so an agent's path is scripted by its
prompt: every offered tool whose name the system prompt or the last user
message spells out (as a whole word) is called, in the order the names first
appear there, once each after that user message; then the model answers in
text. Without such a name, a question about the weather calls the first tool
offered (the examples' agent loop). Tokens are approximated as one per four
characters, the usual rule of thumb for English text.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass

from resumable.simulator.prompts import Prompt, ToolSpec

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9-]{3,}")
_PLACE = re.compile(r"\b[A-Z][a-z]{2,}\b")
_WEATHER = re.compile(r"\bweather\b", re.IGNORECASE)
_STOPWORDS_TEXT = (
    "about above after again also because been before being below between both could "
    "does doing down during each from further have having here into itself just more "
    "most only other over same should some such than that their them then there these "
    "they this those through under until very were what when where which while will "
    "with would your please tell give write make summarize summarise explain describe "
    "list translate answer question"
)
_STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
_FALLBACK_WORDS = ("request", "context", "details")
_OPENERS = (
    "In short,",
    "Put simply,",
    "Overall,",
    "To summarize,",
    "Briefly,",
    "In essence,",
)
_SENTENCES = (
    "{opener} the text is about {a}, {b} and {c}.",
    "{opener} it weighs {a} against {b}.",
    "{opener} {a} matters most, with {b} close behind.",
    "{opener} the key points are {a} and {b}, framed by {c}.",
    "{opener} {a} leads to {b}, which shapes {c}.",
    "{opener} the discussion keeps returning to {a}.",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token usage the simulator reported for one request."""

    input_tokens: int
    output_tokens: int

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A call of one of the offered tools, in place of a text answer."""

    call_id: str  # hex, without the API's prefix (call_, toolu_, fc_)
    name: str
    arguments: Mapping[str, object]

    @property
    def arguments_json(self) -> str:
        """The arguments as the JSON string the OpenAI APIs carry."""
        return json.dumps(self.arguments, sort_keys=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """What the simulated model answers: text or a tool call, and its usage."""

    text: str
    tool_call: ToolCall | None
    is_truncated: bool  # cut at max tokens: finish_reason "length"
    usage: Usage


def count_tokens(text: str) -> int:
    """Approximate tokens as ceil(len(text) / 4)."""
    return math.ceil(len(text) / 4)


def make_reply(prompt: Prompt) -> Reply:
    """The deterministic answer to `prompt`: same prompt, same reply, in any process."""
    input_tokens = max(1, sum(count_tokens(turn.text) for turn in prompt.turns))
    if prompt.tools:
        # Real APIs bill the tool schemas as input too.
        schemas = json.dumps(
            [[t.name, t.parameters] for t in prompt.tools], sort_keys=True
        )
        input_tokens += count_tokens(schemas)
    last = prompt.last_turn
    tool = _next_named_tool(prompt)
    if (
        tool is None
        and prompt.tools
        and last is not None
        and last.role == "user"
        and _WEATHER.search(last.text)
    ):
        tool = prompt.tools[0]
    if tool is not None:
        call = _tool_call(tool, prompt.last_user_text, prompt.digest)
        output_tokens = count_tokens(call.name + call.arguments_json)
        usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
        return Reply(text="", tool_call=call, is_truncated=False, usage=usage)
    text = _answer_text(prompt)
    if prompt.output_schema is not None:
        text = json.dumps(_structured(prompt.output_schema, text), sort_keys=True)
    is_truncated = (
        prompt.max_tokens is not None and count_tokens(text) > prompt.max_tokens
    )
    if prompt.max_tokens is not None and is_truncated:
        text = text[: prompt.max_tokens * 4]
    usage = Usage(input_tokens=input_tokens, output_tokens=count_tokens(text))
    return Reply(text=text, tool_call=None, is_truncated=is_truncated, usage=usage)


def _next_named_tool(prompt: Prompt) -> ToolSpec | None:
    """The first tool the instructions name that was not called since the last user turn."""
    if not prompt.tools:
        return None
    asked = max(
        (i for i, turn in enumerate(prompt.turns) if turn.role == "user"), default=-1
    )
    instructions = " ".join(
        turn.text
        for i, turn in enumerate(prompt.turns)
        if turn.role == "system" or i == asked
    )
    called = {name for turn in prompt.turns[asked + 1 :] for name in turn.calls}
    named = []
    for tool in prompt.tools:
        found = re.search(rf"(?<![\w]){re.escape(tool.name)}(?![\w])", instructions)
        if found is not None and tool.name not in called:
            named.append((found.start(), tool))
    return min(named, key=lambda pair: pair[0])[1] if named else None


def _answer_text(prompt: Prompt) -> str:
    rng = random.Random(prompt.digest)  # noqa: S311 - determinism, not security
    words = _keywords(prompt.last_user_text) or _keywords(
        " ".join(turn.text for turn in prompt.turns)
    )
    pool = words or list(_FALLBACK_WORDS)
    sentences = []
    last = prompt.last_turn
    if last is not None and last.role == "tool":
        snippet = " ".join(last.text.split())[:80] or "no output"
        sentences.append(f"According to {last.tool_name or 'the tool'}: {snippet}.")
    for index in range(rng.randint(2, 4)):
        template = rng.choice(_SENTENCES)
        # The first sentence names the first keyword, so every answer visibly
        # refers to its own prompt.
        order = rng.sample(pool, len(pool))
        if index == 0:
            order = [pool[0], *(word for word in order if word != pool[0])]
        a, b, c = (order * 3)[:3]
        sentences.append(template.format(opener=rng.choice(_OPENERS), a=a, b=b, c=c))
    return " ".join(sentences)


def _structured(schema: Mapping[str, object], answer: str) -> dict[str, object]:
    """An object following `schema`: its strings say the answer, other types a default."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return {}
    out: dict[str, object] = {}
    for name, spec in properties.items():
        kind = spec.get("type") if isinstance(spec, dict) else None
        out[str(name)] = answer if kind == "string" else _argument_value(kind, [])
    return out


def _keywords(text: str) -> list[str]:
    seen: dict[str, None] = {}
    for match in _WORD.finditer(text):
        word = match.group().lower()
        if word not in _STOPWORDS:
            seen.setdefault(word, None)
    return list(seen)[:40]


def _tool_call(tool: ToolSpec, text: str, digest: str) -> ToolCall:
    properties = tool.parameters.get("properties")
    required = tool.parameters.get("required")
    places = _PLACE.findall(text)
    arguments: dict[str, object] = {}
    if isinstance(properties, dict):
        names = required if isinstance(required, list) else list(properties)
        for name in names:
            schema = properties.get(name)
            kind = schema.get("type") if isinstance(schema, dict) else None
            arguments[str(name)] = _argument_value(kind, places)
    return ToolCall(call_id=digest, name=tool.name, arguments=arguments)


def _argument_value(kind: object, places: list[str]) -> object:
    match kind:
        case "string":
            return places[-1] if places else "unknown"
        case "integer" | "number":
            return 1
        case "boolean":
            return False
        case "array":
            return []
        case "object":
            return {}
        case _:
            return None
