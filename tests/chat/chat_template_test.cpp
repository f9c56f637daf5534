#include "ditto/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace ditto {
namespace {

using nlohmann::ordered_json;

std::string render(const std::string& text, const std::string& context = "{}", const RenderLimits& limits = {}) {
  return ChatTemplate::parse(text).render(ordered_json::parse(context), limits);
}

struct Case {
  std::string text;
  std::string context;
  std::string expected;
};

void expect_renders(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    try {
      EXPECT_EQ(render(c.text, c.context), c.expected);
    } catch (const TemplateError& error) {
      ADD_FAILURE() << error.what();
    }
  }
}

// The error that parsing or rendering `text` raises.
TemplateError error_of(const std::string& text, const std::string& context = "{}", const RenderLimits& limits = {}) {
  try {
    render(text, context, limits);
  } catch (const TemplateError& error) {
    return error;
  }
  ADD_FAILURE() << "no error from " << text;
  return TemplateError("", 0, 0);
}

const std::string kMessages =
    R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},)"
    R"( {"role": "assistant", "content": "Hello"}]})";

// Each expected text below is what transformers' environment (jinja2) renders from the same
// template and variables; tests/python/test_chat_template.py compares with it directly.

TEST(ChatTemplateRender, Whitespace) {
  expect_renders({
      {"{% if true %}\n  yes\n{% endif %}\nafter",
       "{}",
       "  yes\nafter"},
      {"  {% if true %}x{% endif %}  \n  {{ 'v' }}  \n",
       "{}",
       "x  \n  v  "},
      {"a  {%- if true -%}  b  {%- endif -%}  c",
       "{}",
       "abc"},
      {"a\n  {%+ if true %}b{% endif +%}\nc",
       "{}",
       "a\n  b\nc"},
      {"a {{- ' b ' -}} c",
       "{}",
       "a b c"},
      {"a\n  {# comment #}\nb{# inline #}c",
       "{}",
       "a\nbc"},
      {"{% raw %}{{ not }}{% if %}{% endraw %}",
       "{}",
       "{{ not }}{% if %}"},
      {"line\r\nnext\rlast\n",
       "{}",
       "line\nnext\nlast"},
      {"text\n\n",
       "{}",
       "text\n"},
  });
}

TEST(ChatTemplateRender, SetAndScopes) {
  expect_renders({
      {"{% set x = 1 %}{% set x = x + 1 %}{{ x }}",
       "{}",
       "2"},
      {"{% set x = 'out' %}{% for i in [1, 2] %}{% set x = i %}{{ x }}{% endfor %}{{ x }}",
       "{}",
       "12out"},
      {"{% set x = 'out' %}{% if true %}{% set x = 'in' %}{% endif %}{{ x }}",
       "{}",
       "in"},
      {"{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
       "{}",
       "6"},
      {"{% set a, b = 'xy' %}{{ b }}{{ a }}{% set t = 1, 2 %}{{ t }}",
       "{}",
       "yx(1, 2)"},
      {"{% set block %}<{{ 1 + 1 }}>{% endset %}{{ block }}{% set up | upper %}abc{% endset %}{{ up }}",
       "{}",
       "<2>ABC"},
  });
}

TEST(ChatTemplateRender, ForLoops) {
  expect_renders({
      {"{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
       kMessages,
       "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;"},
      {"{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ loop.cycle('a', 'b') }};{% endfor %}",
       "{}",
       "-2-a;1-3-b;2--a;"},
      {"{% for x in [] %}x{% else %}empty{% endfor %}",
       "{}",
       "empty"},
      {"{% for x in [1, 2, 3, 4] if x is even %}{{ loop.index }}:{{ x }}/{{ loop.length }} {% endfor %}",
       "{}",
       "1:2/2 2:4/2 "},
      {"{% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}={{ v }};{% endfor %}",
       "{}",
       "b=1;a=2;"},
      {"{% for c in 'héllo' %}[{{ c }}]{% endfor %}{% for k in {'z': 1, 'y': 2} %}{{ k }}{% endfor %}",
       "{}",
       "[h][é][l][l][o]zy"},
      {"{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
       "{}",
       "13"},
      {"{% for m in messages[::-1] %}{{ m.role }} {% endfor %}|{{ messages[1:]|length }}|{{ messages[-1].content }}",
       kMessages,
       "assistant user system |2|Hello"},
      {"{% for row in [[1, 2], [3, 4]] %}{% for x in row %}{{ loop.index }}{{ x }}{% endfor %};{% endfor %}",
       "{}",
       "1122;1324;"},
  });
}

TEST(ChatTemplateRender, IfElifElse) {
  expect_renders({
      {"{% for n in [0, 1, 2, 3] %}{% if n == 0 %}zero{% elif n == 1 %}one{% elif n == 2 %}two{% else %}many{% endif %} {% endfor %}",
       "{}",
       "zero one two many "},
      {"{% if missing %}a{% elif none %}b{% elif '' %}c{% elif [] %}d{% elif {} %}e{% elif 0.0 %}f{% else %}g{% endif %}",
       "{}",
       "g"},
  });
}

TEST(ChatTemplateRender, Macros) {
  expect_renders({
      {"{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }} {{ greet('Bo', '?') }} {{ greet(punct='.', name='Cy') }}",
       "{}",
       "Hi Ann! Hi Bo? Hi Cy."},
      {"{% macro m(a, b) %}[{{ a }}|{{ b }}|{{ b is defined }}]{% endmacro %}{{ m(1) }}",
       "{}",
       "[1||False]"},
      {"{% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, k=3) }}",
       "{}",
       "(1, 2){'k': 3}"},
      {"{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(10) }}",
       "{}",
       "3628800"},
      {"{% set x = 'before' %}{% macro show() %}{{ x }}{% endmacro %}{% set x = 'after' %}{{ show() }}",
       "{}",
       "after"},
      {"{% macro m() %}{% set inner = 1 %}{% endmacro %}{{ m() }}{{ inner is defined }}",
       "{}",
       "False"},
  });
}

TEST(ChatTemplateRender, Expressions) {
  expect_renders({
      {"{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7 / 2 }} {{ 6 / 2 }}",
       "{}",
       "7 9 64 3 -4 2 -2 3.5 3.0"},
      {"{{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 2 ** -2 }} {{ 'ab' * 2 }} {{ [0] * 3 }} {{ [1] + [2] }} {{ 'a' + 'b' }} {{ true + true }}",
       "{}",
       "3.0 0.5 0.25 abab [0, 0, 0] [1, 2] ab 2"},
      {"{{ 'n=' ~ (1 + 2) ~ none ~ true ~ 1.5 }}",
       "{}",
       "n=3NoneTrue1.5"},
      {"{{ -x|abs }} {{ -(x|abs) }} {{ not x is number }} {{ x|string|length + 1 }}",
       "{\"x\": -12}",
       "12 -12 False 4"},
      {"{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ true == 1 }} {{ (1, 2) == [1, 2] }} {{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }}",
       "{}",
       "True False True True True True False True"},
      {"{{ 'ell' in 'hello' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ 'x' in missing }}",
       "{}",
       "True True True True False"},
      {"{{ 0 or '' or 'last' }} {{ 1 and 'b' }} {{ '' and 'b' }} {{ not 0 }} {{ not not 'x' }}",
       "{}",
       "last b  True True"},
      {"{{ 'yes' if 1 else 'no' }} {{ 'yes' if 0 else 'no' }} [{{ 'only' if false }}] {{ 1 if 0 else 2 if 0 else 3 }}",
       "{}",
       "yes no [] 3"},
      {"{{ 'it\\'s' }} {{ \"q\\\"q\" }} {{ 'a\\tb\\\\c' }} {{ '\\u00e9\\x41\\101' }} {{ 'con' 'cat' }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1_000 }} {{ 1.5e3 }} {{ 1e-7 }}",
       "{}",
       "it's q\"q a\tb\\c éAA concat 31 15 5 1000 1500.0 1e-07"},
      {"{{ (1, 2) }} {{ (1,) }} {{ [1, 'a', none, true, 2.5] }} {{ {'k': 'v', 'n': [1]} }} {{ 'quote\\'s' }} {{ ['é', '\\n', '\\x00'] }}",
       "{}",
       "(1, 2) (1,) [1, 'a', None, True, 2.5] {'k': 'v', 'n': [1]} quote's ['é', '\\n', '\\x00']"},
      {"{{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ -0.0 }} {{ 1.0 }} {{ 123456789012345678.0 }} {{ 1/3 }}",
       "{}",
       "0.30000000000000004 1e+16 1000000000000000.0 0.0001 1e-05 -0.0 1.0 1.2345678901234568e+17 0.3333333333333333"},
  });
}

TEST(ChatTemplateRender, AttributesAndItems) {
  expect_renders({
      {"{{ m.role }} {{ m['content'] }} {{ m.missing is defined }} [{{ m.missing }}] {{ m.items is defined }} {{ m['items'] is defined }}",
       "{\"m\": {\"role\": \"user\", \"content\": \"hi\"}}",
       "user hi False [] True True"},
      {"{{ l[0] }} {{ l[-1] }} [{{ l[9] }}] {{ l.0 }} {{ s[1] }} {{ s[-1] }} {{ s[1:3] }} {{ s[::-1] }} {{ s[::2] }} {{ l[1:] }} {{ l[:-1] }} {{ l[5:] }}",
       "{\"l\": [1, 2, 3], \"s\": \"héllo\"}",
       "1 3 [] 1 é o él olléh hlo [2, 3] [1, 2] []"},
      {"{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 0) }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d.items() }}",
       "{\"d\": {\"a\": 1, \"b\": 2}}",
       "1 None 0 ['a', 'b'] [1, 2] [('a', 1), ('b', 2)] dict_items([('a', 1), ('b', 2)])"},
      {"{{ none.x is defined }} {{ (5).x is defined }} {{ 'str'.nope is defined }}",
       "{}",
       "False False False"},
  });
}

TEST(ChatTemplateRender, StringMethods) {
  expect_renders({
      {"{{ s.startswith('He') }} {{ s.endswith(('x', 'ld')) }} {{ s.split() }} {{ s.split('l') }} {{ s.split('l', 1) }} {{ s.rsplit('l', 1) }} {{ ' a  b '.split() }} {{ ' a  b '.split(None, 1) }} {{ ' a  b '.rsplit(None, 1) }}",
       "{\"s\": \"Hello world\"}",
       "True True ['Hello', 'world'] ['He', '', 'o wor', 'd'] ['He', 'lo world'] ['Hello wor', 'd'] ['a', 'b'] ['a', 'b '] [' a', 'b']"},
      {"[{{ s.strip() }}] [{{ s.lstrip() }}] [{{ s.rstrip() }}] [{{ 'xxhixx'.strip('x') }}] [{{ '\\n\\nhi\\n'.lstrip('\\n') }}]",
       "{\"s\": \"  hi  \"}",
       "[hi] [hi  ] [  hi] [hi] [hi\n]"},
      {"{{ s.replace('l', 'L') }} {{ s.replace('l', 'L', 2) }} {{ s.upper() }} {{ s.lower() }} {{ s.title() }} {{ 'hELLO wORLD'.capitalize() }} {{ s.find('o') }} {{ s.rfind('o') }} {{ s.find('z') }} {{ s.count('l') }} {{ s.index('w') }}",
       "{\"s\": \"hello world\"}",
       "heLLo worLd heLLo world HELLO WORLD hello world Hello World Hello world 4 7 -1 3 6"},
      {"{{ '{} and {}'.format(1, 'b') }} {{ '{0}{0}{x}'.format('a', x='b') }} {{ '{!r}'.format('q') }} {{ '%s=%d %.1f %5s|%-3s|%03d %x %r %%' % ('k', 42, 2.25, 'ab', 'c', 7, 255, 'q') }} {{ '%(a)s' % {'a': 'mapped'} }}",
       "{}",
       "1 and b aab 'q' k=42 2.2    ab|c  |007 ff 'q' % mapped"},
      {"{{ ','.join(['a', 'b']) }} {{ 'a\\nb\\r\\nc'.splitlines() }} {{ 'ab'.center(6, '*') }} {{ '42'.zfill(5) }} {{ 'x'.ljust(3) }}| {{ 'k=v'.partition('=') }} {{ 'prefix'.removeprefix('pre') }} {{ '12'.isdigit() }} {{ ' '.isspace() }}",
       "{}",
       "a,b ['a', 'b', 'c'] **ab** 00042 x  | ('k', '=', 'v') fix True True"},
  });
}

TEST(ChatTemplateRender, Filters) {
  expect_renders({
      {"{{ '  x  '|trim }}|{{ 'xxyxx'|trim('x') }}|{{ 'ab'|upper }}|{{ 'AB'|lower }}|{{ 'hello-world foo'|title }}|{{ 'hELLO'|capitalize }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 'é'|length }}|{{ [1, 2]|count }}",
       "{}",
       "x|y|AB|ab|Hello-World Foo|Hello|bba|1|2"},
      {"{{ missing|default('d') }} {{ none|default('d') }} {{ ''|default('d') }} {{ ''|d('d', true) }} {{ 0|default(5, boolean=true) }}",
       "{}",
       "d None  d 5"},
      {"{{ [1, 2, 3]|join(', ') }} {{ [1, 2]|join }} {{ messages|join('|', attribute='role') }} {{ messages|map(attribute='role')|join('/') }} {{ messages|map(attribute='x', default='-')|list }}",
       kMessages,
       "1, 2, 3 12 system|user|assistant system/user/assistant ['-', '-', '-']"},
      {"{{ [3, 1, 2]|sort }} {{ [3, 1, 2]|sort(reverse=true) }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }} {{ messages|sort(attribute='role')|map(attribute='role')|list }}",
       kMessages,
       "[1, 2, 3] [3, 2, 1] ['A', 'b', 'c'] ['A', 'b', 'c'] ['assistant', 'system', 'user']"},
      {"{{ [1, 2, 1, 'a', 'A']|unique|list }} {{ ['a', 'A']|unique(case_sensitive=true)|list }} {{ [1, 2, 3]|sum }} {{ [1, 2]|sum(start=10) }} {{ [3, 1]|min }} {{ ['a', 'B']|max }} {{ []|max is defined }}",
       "{}",
       "[1, 2, 'a'] ['a', 'A'] 6 13 1 B False"},
      {"{{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('odd')|list }} {{ [1, 2, 3]|select('gt', 1)|list }} {{ [0, 1, '', 'a']|select|list }} {{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }} {{ messages|rejectattr('role', 'in', ['user', 'system'])|map(attribute='role')|list }}",
       kMessages,
       "[1, 3] [2, 4] [2, 3] [1, 'a'] ['Hi'] ['assistant']"},
      {"{{ ['a', 'b']|map('upper')|list }} {{ [[1, 2], [3]]|map('join', '+')|list }} {{ [1, 2]|map('string')|map('length')|list }}",
       "{}",
       "['A', 'B'] ['1+2', '3'] [1, 1]"},
      {"{{ [1, 2, 3]|first }} {{ [1, 2, 3]|last }} {{ 'abc'|first }} {{ []|first is defined }} {{ [1, 2, 3]|reverse|list }} {{ 'abc'|reverse }} {{ 'ab'|list }} {{ {'a': 1}|list }} {{ {'b': 1, 'a': 2}|items|list }} {{ {'b': 1, 'A': 2}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='value', reverse=true) }}",
       "{}",
       "1 3 a False [3, 2, 1] cba ['a', 'b'] ['a'] [('b', 1), ('a', 2)] [('A', 2), ('b', 1)] [('a', 2), ('b', 1)]"},
      {"{{ '3'|int + 1 }} {{ '3.9'|int }} {{ 3.9|int }} {{ 'x'|int }} {{ 'x'|int(-1) }} {{ 'ff'|int(base=16) }} {{ '2.5'|float }} {{ 'x'|float }} {{ -3|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(0, 'floor') }} {{ 7|round }}",
       "{}",
       "4 3 3 0 -1 255 2.5 0.0 3 2.0 4.0 2.67 3.0 2.0 7"},
      {"{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ 'a\\nb'|indent('> ') }}",
       "{}",
       "a\n    b\n\n    c|  a\n  b|a\n  \n  b|a\n> b"},
      {"{{ 'hello big world'|truncate(9) }}|{{ 'hello big world'|truncate(9, leeway=0) }}|{{ 'hello big world'|truncate(9, true, '…', 0) }}|{{ 'one two  three'|wordcount }}|{{ 'ab'|center(6) }}|{{ '<a href=\"x\">&</a>'|e }}|{{ 'x'|safe }}|{{ 5|string ~ 'x' }}",
       "{}",
       "hello...|hello...|hello bi…|3|  ab  |&lt;a href=&#34;x&#34;&gt;&amp;&lt;/a&gt;|x|5x"},
      {"{{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ [1, 2, 3]|batch(2, 0)|list }} {{ d|attr('a') is defined }} {{ d|attr('items') is defined }} {{ '%s-%s'|format(1, 2) }}",
       "{\"d\": {\"a\": 1}}",
       "[[1, 2], [3, 4], [5]] [[1, 2], [3, 0]] False True 1-2"},
  });
}

TEST(ChatTemplateRender, ToJson) {
  expect_renders({
      {"{{ v|tojson }}",
       "{\"v\": {\"b\": [1, 2.0, null, true, \"é\\\"\\n\\t \x7f""\\u0001\"], \"a\": {}, \"c\": []}}",
       "{\"b\": [1, 2.0, null, true, \"é\\\"\\n\\t \x7f""\\u0001\"], \"a\": {}, \"c\": []}"},
      {"{{ v|tojson(indent=2) }}",
       "{\"v\": {\"b\": [1, {\"x\": []}], \"a\": \"s\"}}",
       "{\n  \"b\": [\n    1,\n    {\n      \"x\": []\n    }\n  ],\n  \"a\": \"s\"\n}"},
      {"{{ v|tojson(sort_keys=true) }} {{ v|tojson(separators=(',', ':')) }} {{ v|tojson(ensure_ascii=true) }} {{ v|tojson(indent='\\t') }}",
       "{\"v\": {\"z\": \"日本😀\", \"a\": 1}}",
       "{\"a\": 1, \"z\": \"日本😀\"} {\"z\":\"日本😀\",\"a\":1} {\"z\": \"\\u65e5\\u672c\\ud83d\\ude00\", \"a\": 1} {\n\t\"z\": \"日本😀\",\n\t\"a\": 1\n}"},
      {"{{ [1.5e-7, 1e22, 1e16, 123.0, -0.0, 0.1]|tojson }} {{ 'é'|tojson(2) }} {{ 1|tojson(indent=0) }} {{ [1, [2]]|tojson(indent=0) }}",
       "{}",
       "[1.5e-07, 1e+22, 1e+16, 123.0, -0.0, 0.1] \"\\u00e9\" 1 [\n1,\n[\n2\n]\n]"},
  });
}

TEST(ChatTemplateRender, Tests) {
  expect_renders({
      {"{% for v in [none, true, 0, 2.5, 'a', [1], {'k': 1}, (1,), missing] %}{{ v is defined }}{{ v is none }}{{ v is boolean }}{{ v is number }}{{ v is integer }}{{ v is float }}{{ v is string }}{{ v is mapping }}{{ v is sequence }}{{ v is iterable }};{% endfor %}",
       "{}",
       "TrueTrueFalseFalseFalseFalseFalseFalseFalseFalse;TrueFalseTrueTrueFalseFalseFalseFalseFalseFalse;TrueFalseFalseTrueTrueFalseFalseFalseFalseFalse;TrueFalseFalseTrueFalseTrueFalseFalseFalseFalse;TrueFalseFalseFalseFalseFalseTrueFalseTrueTrue;TrueFalseFalseFalseFalseFalseFalseFalseTrueTrue;TrueFalseFalseFalseFalseFalseFalseTrueTrueTrue;TrueFalseFalseFalseFalseFalseFalseFalseTrueTrue;FalseFalseFalseFalseFalseFalseFalseFalseTrueTrue;"},
      {"{{ 3 is odd }}{{ 3 is even }}{{ 9 is divisibleby 3 }}{{ 2 is eq 2 }}{{ 2 is equalto 2 }}{{ 2 is ne 2 }}{{ 2 is gt 1 }}{{ 2 is ge 3 }}{{ 2 is lt 3 }}{{ 2 is le 1 }}{{ 1 is in [1] }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ true is true }}{{ 1 is true }}{{ false is false }}{{ none is sameas none }}{{ 'upper' is filter }}{{ 'odd' is test }}{{ missing is undefined }}{{ 2 is not odd }}",
       "{}",
       "TrueFalseTrueTrueTrueFalseTrueFalseTrueFalseTrueTrueTrueTrueFalseTrueTrueTrueTrueTrueTrue"},
  });
}

TEST(ChatTemplateRender, GlobalsAndBlocks) {
  expect_renders({
      {"{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(3, 0, -1)|list }} {{ dict(a=1) }} {{ dict([('k', 'v')], x=2) }} {{ namespace(a=1).a }}",
       "{}",
       "[0, 1, 2] [1, 3, 5] [3, 2, 1] {'a': 1} {'k': 'v', 'x': 2} 1"},
      {"{% with a = 1, b = 2 %}{{ a + b }}{% set c = 3 %}{% endwith %}{{ c is defined }}{% generation %}gen{% endgeneration %}{% filter upper %}up{% endfilter %}{% print 'p', 1 %}",
       "{}",
       "3FalsegenUPp1"},
  });
}

TEST(ChatTemplateRender, UndefinedAndGenerators) {
  expect_renders({
      {"[{{ missing }}] {{ missing|length }} {{ missing|list }} {{ missing|string }} {{ missing ~ 'x' }} {{ missing == missing }} {{ missing is none }} {% for x in missing %}never{% endfor %}",
       "{}",
       "[] 0 []  x True False "},
      {"{% set g = [1, 2, 3]|select %}{{ g|first }}{{ g|list }}{{ g|list }}{% if []|select %}[always true]{% endif %}",
       "{}",
       "1[2, 3][][always true]"},
  });
}
// --- render_chat: the inputs as transformers' apply_chat_template passes them

TEST(ChatTemplateRenderChat, NormalisesMessagesAsTransformersDoes) {
  const auto tmpl = ChatTemplate::parse(
      "{% for m in messages %}{{ m }}\n{% endfor %}{{ tools }}|{{ documents }}|{{ add_generation_prompt }}|"
      "{{ bos_token }}|{{ eos_token }}|{{ pad_token }}|{{ enable_thinking }}");
  ChatInputs inputs;
  inputs.messages = ordered_json::parse(R"([
    {"role": "user", "content": "hi", "name": null},
    {"role": "assistant", "content": null, "reasoning": "why",
     "tool_calls": [{"function": {"name": "f", "arguments": {"x": null}}}]},
    {"role": "assistant", "content": "a", "thinking": "t", "reasoning_content": "r"}])");
  inputs.add_generation_prompt = true;
  inputs.special_tokens = {{"eos_token", "<|im_end|>"}, {"pad_token", "<|endoftext|>"}, {"bos_token", "unused"}};
  inputs.extra = {{"enable_thinking", false}, {"bos_token", "<s>"}};
  // apply_chat_template(messages, chat_template=..., add_generation_prompt=True,
  // enable_thinking=False, bos_token="<s>") with the Qwen3 tokenizer:
  EXPECT_EQ(tmpl.render_chat(inputs),
            "{'role': 'user', 'content': 'hi'}\n"
            "{'thinking': 'why', 'role': 'assistant', 'reasoning': 'why', 'tool_calls': [{'function': "
            "{'name': 'f', 'arguments': {'x': None}}}], 'reasoning_content': 'why'}\n"
            "{'thinking': 't', 'role': 'assistant', 'content': 'a', 'reasoning_content': 'r'}\n"
            "None|None|True|<s>|<|im_end|>|<|endoftext|>|False");
}

TEST(ChatTemplateRenderChat, RefusesInputsTransformersRefuses) {
  const auto tmpl = ChatTemplate::parse("{{ messages|length }}");
  ChatInputs inputs;
  inputs.messages = ordered_json::parse(R"(["not a message"])");
  EXPECT_THROW(tmpl.render_chat(inputs), Error);
  inputs.messages = ordered_json::array();
  inputs.extra = {{"messages", 1}};
  EXPECT_THROW(tmpl.render_chat(inputs), Error);
}

TEST(ChatTemplateRenderChat, Qwen3TemplateWithToolsAndReasoning) {
  std::ifstream file(DITTO_QWEN3_TOKENIZER_CONFIG);
  ASSERT_TRUE(file) << DITTO_QWEN3_TOKENIZER_CONFIG;
  const auto config = ordered_json::parse(file);
  const auto tmpl = ChatTemplate::parse(config["chat_template"].get<std::string>());
  ChatInputs inputs;
  inputs.messages = ordered_json::parse(R"([
    {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Zürich?"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function":
      {"name": "get_weather", "arguments": {"city": "Zürich"}}}]},
    {"role": "tool", "content": "21 °C"},
    {"role": "assistant", "content": "It is 21 °C.", "reasoning_content": "The tool said 21."}])");
  inputs.tools = ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
  inputs.add_generation_prompt = true;
  inputs.special_tokens = {{"eos_token", "<|im_end|>"}, {"pad_token", "<|endoftext|>"}};
  inputs.extra = {{"enable_thinking", false}};
  // transformers' apply_chat_template(..., tokenize=False) with the same inputs:
  EXPECT_EQ(tmpl.render_chat(inputs),
            "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the "
            "user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
            "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": "
            "\"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}\n</tools>\n\nFor each function "
            "call, return a json object with function name and arguments within <tool_call></tool_call> XML "
            "tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
            "</tool_call><|im_end|>\n<|im_start|>user\nWeather in Zürich?<|im_end|>\n<|im_start|>assistant\n"
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\"}}\n"
            "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n21 °C\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n<think>\nThe tool said 21.\n</think>\n\nIt is 21 °C.<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

// --- errors: a ditto::TemplateError naming the line and column, never a crash

TEST(ChatTemplateErrors, SyntaxErrorsNameTheirPlace) {
  struct Expected {
    std::string text;
    int line, column;
    std::string reason;
  };
  const std::vector<Expected> cases = {
      {"{% for x in y %}", 1, 4, "unclosed 'for': expected 'endfor' or 'else' before the end of the template"},
      {"a\n{% if x %}\n{% endfor %}", 3, 4, "unknown tag 'endfor'"},
      {"{{ x|nosuch }}", 1, 6, "no filter named 'nosuch'"},
      {"line\n{{ x is nosuch }}", 2, 9, "no test named 'nosuch'"},
      {"\n\n  {{ 1 + }}", 3, 10, "unexpected '}}'"},
      {"{{ 'abc }}", 1, 4, "unexpected character \"'\""},
      {"é {{ x ! }}", 1, 8, "unexpected character '!'"},
      {"{{ (1, 2 }}", 1, 10, "unexpected '}', expected ')'"},
      {"{#", 1, 1, "missing end of comment tag (#})"},
      {"{% raw %}x", 1, 10, "missing end of raw block ({% endraw %})"},
      {"{{ '\\x4' }}", 1, 5, "truncated \\x escape in a string"},
      {"{% set 1 = 2 %}", 1, 8, "cannot assign to '1'"},
      {"{% macro m(a=1, b) %}{% endmacro %}", 1, 18, "non-default argument follows default argument"},
      {"{% break %}", 1, 4, "'break' outside a for loop"},
      {"{% for x in y %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}", 1, 35, "'continue' outside a for loop"},
      {"{{ 1 is odd is even }}", 1, 13, "tests cannot be chained with 'is'"},
      {"{% include 'x' %}", 1, 4, "the 'include' tag is not supported in chat templates"},
      {"{% call m() %}{% endcall %}", 1, 4, "the 'call' tag is not supported in chat templates"},
      {"{% for x in y recursive %}{% endfor %}", 1, 15, "recursive loops are not supported"},
      {"{{ x|random }}", 1, 6, "the filter 'random' is not supported"},
      {"{{ f(*a) }}", 1, 6, "*args and **kwargs in calls are not supported"},
      {"{{ 99999999999999999999 }}", 1, 4, "integer literal too large"},
      {"{{ '\\ud800' }}", 1, 5, "a lone surrogate cannot be part of a string"},
      {"ok \xff", 1, 4, "the template is not valid UTF-8"},
  };
  for (const Expected& c : cases) {
    SCOPED_TRACE(c.text);
    try {
      ChatTemplate::parse(c.text);
      ADD_FAILURE() << "parsed";
    } catch (const TemplateError& error) {
      EXPECT_EQ(error.reason(), c.reason);
      EXPECT_EQ(error.line(), c.line);
      EXPECT_EQ(error.column(), c.column);
      EXPECT_EQ(std::string(error.what()), "chat template line " + std::to_string(c.line) + ", column " +
                                               std::to_string(c.column) + ": " + c.reason);
    }
  }
}

TEST(ChatTemplateErrors, UnknownFiltersInsideIfFailOnlyWhenReached) {
  // As in jinja2: inside an if (or a conditional expression) the name is looked up when used.
  EXPECT_EQ(render("{% if false %}{{ x|nosuch }}{% endif %}ok"), "ok");
  EXPECT_EQ(render("{{ x|nosuch if false else 'ok' }}"), "ok");
  const TemplateError error = error_of("{% if true %}\n{{ x|nosuch }}{% endif %}");
  EXPECT_EQ(error.line(), 2);
  EXPECT_EQ(error.reason(), "no filter named 'nosuch'");
  // A loop inside the if has its own frame in jinja2, where the name must exist.
  EXPECT_THROW(ChatTemplate::parse("{% if false %}{% for x in y %}{{ x|nosuch }}{% endfor %}{% endif %}"),
               TemplateError);
}

TEST(ChatTemplateErrors, RenderErrorsNameTheirPlace) {
  struct Expected {
    std::string text;
    int line, column;
    std::string reason;
  };
  const std::vector<Expected> cases = {
      {"ok\n  {{ raise_exception('bad role') }}", 2, 6, "bad role"},
      {"{{ undefined_x.y }}", 1, 15, "'undefined_x' is undefined"},
      {"{{ d.a.b }}", 1, 7, "'dict object' has no attribute 'a'"},
      {"{{ 1 +\n'a' }}", 1, 6, "unsupported operand type(s) for +: 'int' and 'str'"},
      {"{% for x in 5 %}{% endfor %}", 1, 4, "'int' object is not iterable"},
      {"{{ [].append(1) }}", 1, 6, "access to attribute 'append' of 'list' object is unsafe."},
      {"{{ 1 // 0 }}", 1, 6, "division by zero"},
      {"{{ 9223372036854775807 + 1 }}", 1, 24, "integer overflow (ditto's template integers are 64-bit)"},
      {"{{ d|selectattr('a')|length }}", 1, 22, "object of type 'generator' has no len()"},
      {"{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", 1, 34, "macro 'm' takes not more than 1 argument(s)"},
      {"{% set a, b = [1] %}", 1, 4, "not enough values to unpack (expected 2, got 1)"},
      {"{{ range(100001)|length }}", 1, 4, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000)."},
      {"{{ u|tojson }}", 1, 6, "Object of type Undefined is not JSON serializable"},
      // Found by the fuzzer: a width beyond 64 bits.
      {"{{ '%400000000000000000000s' % 'a' }}", 1, 30, "format width or precision too large"},
  };
  for (const Expected& c : cases) {
    SCOPED_TRACE(c.text);
    const TemplateError error = error_of(c.text, R"({"d": {}})");
    EXPECT_EQ(error.reason(), c.reason);
    EXPECT_EQ(error.line(), c.line);
    EXPECT_EQ(error.column(), c.column);
  }
}

TEST(ChatTemplateErrors, BadContexts) {
  const auto tmpl = ChatTemplate::parse("{{ x }}");
  EXPECT_THROW(tmpl.render(ordered_json::array()), Error);
  EXPECT_THROW(tmpl.render({{"x", "\xc3"}}), Error);  // not UTF-8
  EXPECT_THROW(tmpl.render({{"\xff", 1}}), Error);
  EXPECT_THROW(tmpl.render({{"x", uint64_t{1} << 63}}), Error);  // beyond 64-bit ints
}

// --- limits: a template is a program; its work is bounded

TEST(ChatTemplateLimits, EndlessRecursionIsAnError) {
  const TemplateError error = error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}");
  EXPECT_NE(error.reason().find("nests too deeply"), std::string::npos) << error.what();
}

TEST(ChatTemplateLimits, DeepNestingIsRefusedWhenParsed) {
  const std::string deep = "{{ " + std::string(1000, '(') + "1" + std::string(1000, ')') + " }}";
  const TemplateError error = error_of(deep);
  EXPECT_NE(error.reason().find("nests more than"), std::string::npos) << error.what();
  std::string ifs;
  for (int i = 0; i < 1000; ++i) ifs += "{% if true %}";
  EXPECT_THROW(ChatTemplate::parse(ifs), TemplateError);
  // A chain a + b + ... nests to the left: a long one renders, a very long one fails cleanly.
  std::string sum = "{{ 0";
  for (int i = 0; i < 200; ++i) sum += " + 1";
  EXPECT_EQ(render(sum + " }}"), "200");
  for (int i = 200; i < 5000; ++i) sum += " + 1";
  EXPECT_THROW(render(sum + " }}"), TemplateError);
}

TEST(ChatTemplateLimits, DeepValuesAreRefused) {
  // Lists, generators and bound methods built in a loop around themselves.
  for (const std::string link : {"[ns.x]", "[ns.x]|select", "[ns.x].copy", "{'k': ns.x}"}) {
    SCOPED_TRACE(link);
    const TemplateError error = error_of("{% set ns = namespace(x=1) %}{% for i in range(1000) %}{% set ns.x = " +
                                         link + " %}{% endfor %}");
    EXPECT_EQ(error.reason(), "a value nests more than 256 levels deep");
  }
  // Namespaces chain without limit; freeing the chain must not recurse, printing it stops.
  const std::string chain =
      "{% set ns = namespace(c=none) %}{% for i in range(100000) %}{% set ns.c = namespace(c=ns.c) %}{% endfor %}";
  EXPECT_EQ(render(chain + "done"), "done");
  EXPECT_NE(error_of(chain + "{{ ns }}").reason().find("nests too deeply to print"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}").reason().find("nests too deeply"),
            std::string::npos);
  // Input nested deeper than that is refused before it is read.
  const std::string deep_json = "{\"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_THROW(render("{{ x }}", deep_json), Error);
}

TEST(ChatTemplateLimits, StepsAndSizeAreBounded) {
  RenderLimits limits;
  limits.max_steps = 1000;
  EXPECT_EQ(render("{% for i in range(999) %}{% endfor %}ok", "{}", limits), "ok");
  EXPECT_NE(error_of("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", "{}", limits)
                .reason()
                .find("loop iterations"),
            std::string::npos);
  limits = RenderLimits{};
  limits.max_output_bytes = 100;
  EXPECT_EQ(render("{{ 'x' * 100 }}", "{}", limits), std::string(100, 'x'));
  EXPECT_THROW(render("{{ 'x' * 101 }}", "{}", limits), TemplateError);
  EXPECT_THROW(render("{% for i in range(101) %}x{% endfor %}", "{}", limits), TemplateError);
  EXPECT_THROW(render("{% set ns = namespace(s='xxxxxxxxxx') %}{% for i in range(5) %}{% set ns.s = ns.s ~ ns.s %}"
                      "{% endfor %}",
                      "{}", limits),
               TemplateError);
}

TEST(ChatTemplateLimits, NamespaceCyclesAreFreed) {
  // A namespace that holds itself (directly, or through a generator) would leak a reference
  // cycle; LeakSanitizer in the sanitizer build checks that it does not.
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.me = ns %}{% set ns.g = [ns]|select %}{{ ns.me.me is defined }}"),
            "True");
}

// --- robustness: whatever the text, a template renders or fails with a TemplateError

const std::string kRichTemplate = R"({%- set ns = namespace(count=0, last=none) %}
{%- macro show(v, depth=0) %}{% if v is mapping %}{% for k, x in v|dictsort %}{{ k }}:{{ show(x, depth + 1) }}
{% endfor %}{% elif v is string %}'{{ v|trim }}'{% else %}{{ v|tojson(indent=2) }}{% endif %}{% endmacro %}
{#- a comment #}
{%- for m in messages[::-1] if m.role != 'tool' %}
  {%- set ns.count = ns.count + 1 %}{% set ns.last = m %}
  {{- '<|' ~ m.role|upper ~ '|>' }}{{ m.content.split('\n')|join(' ')|replace('a', 'b', 1) }}
  {%- if loop.first and m.content is string %}{{ show(m) }}{% elif loop.last %}{{ m|tojson }}{% else %}{% continue %}{% endif %}
{%- else %}{{ raise_exception('no messages') }}{% endfor %}
{{ ns.count }} {{ '%s=%d' % ('n', ns.count) }} {{ messages|map(attribute='role')|unique|list }}{% raw %}{{ raw }}{% endraw %}
)";

void render_or_fail_cleanly(const std::string& text) {
  try {
    render(text, kMessages);
  } catch (const TemplateError&) {
  } catch (const std::exception& other) {
    ADD_FAILURE() << "not a TemplateError: " << other.what() << "\nfrom: " << text;
  }
}

TEST(ChatTemplateRobustness, EveryPrefixRendersOrFailsCleanly) {
  ASSERT_NO_THROW(render(kRichTemplate, kMessages));
  for (size_t n = 0; n <= kRichTemplate.size(); ++n) render_or_fail_cleanly(kRichTemplate.substr(0, n));
}

TEST(ChatTemplateRobustness, RandomEditsRenderOrFailCleanly) {
  std::mt19937 rng(12345);
  const std::string alphabet = "{}%#-+()[]'\"|.~,:=*/ \n\tabnoxif0123456789";
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text = kRichTemplate;
    for (int edits = 1 + static_cast<int>(rng() % 4); edits > 0; --edits) {
      const size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0: text[at] = alphabet[rng() % alphabet.size()]; break;
        case 1: text.erase(at, 1 + rng() % 8); break;
        default: text.insert(at, 1, alphabet[rng() % alphabet.size()]);
      }
    }
    render_or_fail_cleanly(text);
  }
}

TEST(ChatTemplate, RendersFromSeveralThreads) {
  const auto tmpl = ChatTemplate::parse(kRichTemplate);
  const auto context = ordered_json::parse(kMessages);
  const std::string expected = tmpl.render(context);
  std::vector<std::string> results(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) results[t] = tmpl.render(context);
    });
  }
  for (auto& thread : threads) thread.join();
  for (const std::string& result : results) EXPECT_EQ(result, expected);
}

}  // namespace
}  // namespace ditto
