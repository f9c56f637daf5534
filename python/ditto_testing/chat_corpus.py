"""Conversations and tools for testing chat templates: multi-turn, every role, tool calls and
tool responses, reasoning under each of its names, unicode, empty, long and template-like
contents. Deterministic, so that a failure names the same inputs every time."""
import random

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city — in °C.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Zürich or 東京"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 14},
            },
            "required": ["city"],
        },
    },
}

SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": 'Search the web. Quotes: "double" and \'single\'.',
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "filters": {
                    "type": "object",
                    "properties": {"site": {"type": "string"}, "after": {"type": "number", "default": 1.5e-7}},
                },
                "exact": {"type": "boolean", "default": False},
                "limit": {"type": ["integer", "null"], "default": None},
            },
            "required": ["query"],
        },
    },
}

TOOLS = [WEATHER_TOOL, SEARCH_TOOL]


def _long_text(n_words, seed):
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "Ωmega", "naïve", "日本語", "emoji🙂", "tab\there", "end."]
    lines = []
    for _ in range(n_words // 12):
        lines.append(" ".join(rng.choice(words) for _ in range(12)))
    return "\n".join(lines)


def _call(name, arguments, call_id=None):
    call = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if call_id is not None:
        call["id"] = call_id
    return call


CONVERSATIONS = {
    "one_user": [{"role": "user", "content": "What is the capital of France?"}],
    "system_user": [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "Name a prime."},
    ],
    "multi_turn": [
        {"role": "system", "content": "Answer in one sentence."},
        {"role": "user", "content": "Why is the sky blue?"},
        {"role": "assistant", "content": "Rayleigh scattering favours short wavelengths."},
        {"role": "user", "content": "And sunsets?"},
        {"role": "assistant", "content": "Longer paths scatter the blue away, leaving red."},
        {"role": "user", "content": "Thanks!"},
    ],
    "alternating_no_system": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
    ],
    "unicode": [
        {"role": "system", "content": "Réponds en français. 日本語も大丈夫。"},
        {"role": "user", "content": "Emoji 👩‍👩‍👧 and 🙂, RTL مرحبا, combining e\u0301, NBSP\u00a0here, "
                                    "line\u2028separator, zero\u200bwidth, control \u0001 and \u007f."},
        {"role": "assistant", "content": "Ça va ✓ — «citation» ‘quotes’ \"double\" 'single' \\backslash"},
        {"role": "user", "content": "\U0001F600\U0001F4A9 astral"},
    ],
    "empty_contents": [
        {"role": "system", "content": ""},
        {"role": "user", "content": ""},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": " "},
    ],
    "long": [
        {"role": "system", "content": _long_text(600, 1)},
        {"role": "user", "content": _long_text(4000, 2)},
        {"role": "assistant", "content": _long_text(1200, 3)},
        {"role": "user", "content": "Summarise."},
    ],
    "template_like": [
        {"role": "user", "content": "{{ messages }} {% if x %}not a tag{% endif %} {# nor this #} <|im_end|>"},
        {"role": "assistant", "content": "<think>\nfake thought\n</think>\n\n}}{{ raw %}"},
        {"role": "user", "content": "<tool_response>\nnot really\n</tool_response>"},
    ],
    "whitespace": [
        {"role": "system", "content": "\n\n  padded system  \n\n"},
        {"role": "user", "content": "\t tabs and spaces \t"},
        {"role": "assistant", "content": "\n\nleading newlines"},
        {"role": "user", "content": "trailing newlines\n\n\n"},
    ],
    "tool_call": [
        {"role": "system", "content": "Use tools when useful."},
        {"role": "user", "content": "Weather in Zürich?"},
        {"role": "assistant", "content": "", "tool_calls": [_call("get_weather", {"city": "Zürich", "days": 3})]},
        {"role": "tool", "name": "get_weather", "content": '{"temperature": 21.5, "sky": "clear"}'},
        {"role": "assistant", "content": "It is 21.5 °C and clear."},
    ],
    "tool_calls_string_arguments": [
        {"role": "user", "content": "Search two things."},
        {"role": "assistant", "content": None, "tool_calls": [
            _call("search", '{"query": "jinja"}', "call_1"),
            _call("search", {"query": "ditto", "filters": {"site": "example.org", "after": 1e22},
                             "exact": True, "limit": None, "ratio": -0.0, "big": 12345678901234}, "call_2"),
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "result one"},
        {"role": "tool", "tool_call_id": "call_2", "content": "result two"},
        {"role": "assistant", "content": "Both found."},
    ],
    "tool_call_with_content": [
        {"role": "user", "content": "What's the weather?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [_call("get_weather", {"city": "東京"})]},
        {"role": "tool", "content": "雨"},
    ],
    "multi_step_tools": [
        {"role": "user", "content": "Plan a trip."},
        {"role": "assistant", "content": "", "tool_calls": [_call("get_weather", {"city": "Oslo"})]},
        {"role": "tool", "content": "snow"},
        {"role": "assistant", "content": "", "tool_calls": [_call("search", {"query": "Oslo hotels"})]},
        {"role": "tool", "content": "three hotels"},
        {"role": "assistant", "content": "Pack warm clothes."},
        {"role": "user", "content": "Great."},
    ],
    "reasoning": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "Add two and two."},
        {"role": "user", "content": "3+3?"},
        {"role": "assistant", "content": "<think>\nthree and three\n</think>\n\n6"},
        {"role": "user", "content": "4+4?"},
        {"role": "assistant", "content": "8", "thinking": "four and four"},
        {"role": "user", "content": "5+5?"},
        {"role": "assistant", "content": "10", "reasoning": "five and five", "reasoning_content": None},
    ],
    "reasoning_last": [
        {"role": "user", "content": "Why?"},
        {"role": "assistant", "content": "Because.", "reasoning_content": "\nthinking hard\n"},
    ],
}
