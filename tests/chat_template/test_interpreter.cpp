// The Jinja subset, construct by construct; expected strings are what jinja2 3.1 renders.
#include <gtest/gtest.h>

#include "render_helper.h"

namespace surogate::chat_template {
namespace {

using testing::render_source;

TEST(Interpreter, OutputsLiteralsLikePython) {
  EXPECT_EQ(render_source("{{ 1 }} {{ 1.0 }} {{ 'a' }} {{ none }} {{ true }} {{ [1, 'a', none] }}"),
            "1 1.0 a None True [1, 'a', None]");
  EXPECT_EQ(render_source("{{ {'a': 1, 'b': [2]} }} {{ (1,) }} {{ 1e20 }} {{ 0.1 + 0.2 }}"),
            "{'a': 1, 'b': [2]} (1,) 1e+20 0.30000000000000004");
  EXPECT_EQ(render_source("{{ \"it's\" }} {{ ['it\\'s'] }}"), "it's [\"it's\"]");
}

TEST(Interpreter, Arithmetic) {
  EXPECT_EQ(render_source("{{ 1 / 2 }} {{ 7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 3 - 5 }} {{ 2 * 'ab' }}"),
            "0.5 3 2 1024 -2 abab");
  EXPECT_EQ(render_source("{{ 'a' ~ 1 ~ none ~ missing }}|{{ [1] + [2] }}"), "a1None|[1, 2]");
  EXPECT_EQ(render_source("{{ -7.5 // 2 }} {{ -7.5 % 2 }}"), "-4.0 0.5");
}

TEST(Interpreter, ComparisonsAndLogic) {
  EXPECT_EQ(render_source("{{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ 2 >= 3 }} {{ 'b' in 'abc' }} {{ 4 not in [1, 2] }}"),
            "True True False True True");
  EXPECT_EQ(render_source("{{ 0 or 'x' }} {{ 1 and 'y' }} {{ not none }} {{ 'k' in {'k': 1} }}"), "x y True True");
  EXPECT_EQ(render_source("{{ 'yes' if x else 'no' }}{{ 'never' if false }}", R"({"x": 1})"), "yes");
}

TEST(Interpreter, IfElifElse) {
  const std::string source = "{% if n > 1 %}many{% elif n == 1 %}one{% else %}none{% endif %}";
  EXPECT_EQ(render_source(source, R"({"n": 5})"), "many");
  EXPECT_EQ(render_source(source, R"({"n": 1})"), "one");
  EXPECT_EQ(render_source(source, R"({"n": 0})"), "none");
}

TEST(Interpreter, ForLoopVariables) {
  EXPECT_EQ(render_source("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.length }}"
                          "{{ 'F' if loop.first }}{{ 'L' if loop.last }}{{ x }};{% endfor %}"),
            "1033Fa;2123b;3213Lc;");
  EXPECT_EQ(render_source("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render_source("{% for x in [1, 2, 3, 4] if x is even %}{{ x }}/{{ loop.length }} {% endfor %}"),
            "2/2 4/2 ");
  EXPECT_EQ(render_source("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }},{% endfor %}"), "a=1,b=2,");
  EXPECT_EQ(render_source("{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}"
                          "{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "13");
  EXPECT_EQ(render_source("{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }}|{% endfor %}"),
            "-2|1-3|2-|");
}

TEST(Interpreter, ScopesAndNamespace) {
  // A set inside a loop does not leak, not even to the next iteration; a namespace does.
  EXPECT_EQ(render_source("{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = 5 %}{{ x }}{% endfor %}{{ x }}"),
            "15151");
  EXPECT_EQ(render_source("{% set ns = namespace(total=0) %}{% for i in [1, 2, 3] %}{% set ns.total = ns.total + i %}"
                          "{% endfor %}{{ ns.total }}"),
            "6");
  EXPECT_EQ(render_source("{% if true %}{% set y = 'set in if' %}{% endif %}{{ y }}"), "set in if");
  EXPECT_EQ(render_source("{% set a, b = 1, 2 %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(render_source("{% set block %}  <{{ 1 + 1 }}>{% endset %}[{{ block }}]"), "[  <2>]");
  EXPECT_EQ(render_source("{% with v = 3 %}{{ v }}{% endwith %}[{{ v }}]"), "3[]");
}

TEST(Interpreter, MacrosAndCall) {
  EXPECT_EQ(render_source("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                          "{{ greet('Ann') }} {{ greet('Bob', punct='?') }} {{ greet(name='Cy', punct='.') }}"),
            "Hi Ann! Hi Bob? Hi Cy.");
  EXPECT_EQ(render_source("{% macro wrap() %}[{{ caller() }}]{% endmacro %}{% call wrap() %}inner{% endcall %}"),
            "[inner]");
  EXPECT_EQ(render_source("{% macro m(a) %}{{ a }}{{ varargs }}{% endmacro %}{{ m(1, 2, 3) }}"), "1(2, 3)");
}

TEST(Interpreter, SubscriptsSlicesAndAttributes) {
  EXPECT_EQ(render_source("{{ xs[0] }}{{ xs[-1] }}{{ xs[::-1] }}{{ xs[1:] }}{{ 'hello'[1:4] }}{{ 'abc'[::-1] }}",
                          R"({"xs": [1, 2, 3]})"),
            "13[3, 2, 1][2, 3]ellcba");
  EXPECT_EQ(render_source("{{ m.role }}{{ m['role'] }}{{ m.missing }}|{{ m.missing is defined }}{{ xs[10] }}",
                          R"({"m": {"role": "user"}, "xs": []})"),
            "useruser|False");
  EXPECT_EQ(render_source("{{ xs.0 }} {{ '日本語'[1] }} {{ '日本語' | length }}", R"({"xs": ["a"]})"), "a 本 3");
}

TEST(Interpreter, Tests) {
  EXPECT_EQ(render_source("{{ x is defined }}{{ y is undefined }}{{ none is none }}{{ 's' is string }}"
                          "{{ {} is mapping }}{{ [] is iterable }}{{ 'a' is sequence }}{{ 1.5 is number }}",
                          R"({"x": 1})"),
            "TrueTrueTrueTrueTrueTrueTrueTrue");
  EXPECT_EQ(render_source("{{ true is boolean }}{{ false is false }}{{ true is true }}{{ 3 is odd }}{{ 4 is even }}"
                          "{{ 'a' is equalto 'a' }}{{ 2 is eq 3 }}{{ 9 is divisibleby 3 }}{{ 1 is not string }}"),
            "TrueTrueTrueTrueTrueTrueFalseTrueTrue");
}

TEST(Interpreter, StringFilters) {
  EXPECT_EQ(render_source("{{ '  hi  ' | trim }}|{{ 'Hi' | upper }}{{ 'Hi' | lower }}{{ 'hELLO' | capitalize }}"
                          "|{{ 'hello world-x' | title }}|{{ 'a-b' | replace('-', '+') }}|{{ 'a b  c' | wordcount }}"),
            "hi|HIhiHello|Hello World-X|a+b|3");
  EXPECT_EQ(render_source("{{ 'straße' | upper }} {{ 'ÀÉ' | lower }}"), "STRASSE àé");
  EXPECT_EQ(render_source("{{ 'a\nb' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}"), "a\n  b|  a\n  b");
  EXPECT_EQ(render_source("{{ missing | default('d') }}{{ '' | default('e', true) }}{{ 'x' | d('no') }}"), "dex");
  EXPECT_EQ(render_source("{{ 3 | string }}{{ '42' | int + 1 }}{{ 'x' | int }}{{ '2.5' | float }}{{ -3 | abs }}"),
            "34302.53");
  EXPECT_EQ(render_source("{{ 2.5 | round }} {{ 3.14159 | round(2) }} {{ 2.1 | round(0, 'ceil') }}"), "2.0 3.14 3.0");
}

TEST(Interpreter, SequenceFilters) {
  const std::string vars = R"({"items": [{"n": "b", "v": 2}, {"n": "a", "v": 1}, {"n": "c"}]})";
  EXPECT_EQ(render_source("{{ items | map(attribute='n') | join(',') }}", vars), "b,a,c");
  EXPECT_EQ(render_source("{{ items | selectattr('v', 'defined') | map(attribute='n') | list }}", vars), "['b', 'a']");
  EXPECT_EQ(render_source("{{ items | rejectattr('v') | map(attribute='n') | first }}", vars), "c");
  EXPECT_EQ(render_source("{{ [1, 2, 3, 4] | select('odd') | list }}{{ [1, 2] | reject('odd') | list }}"), "[1, 3][2]");
  EXPECT_EQ(render_source("{{ ['B', 'a', 'A'] | unique | list }} {{ [3, 1, 2] | sort }} {{ [1, 2] | last }}"),
            "['B', 'a'] [1, 2, 3] 2");
  EXPECT_EQ(render_source("{{ {'b': 1, 'a': 2} | items | list }} {{ [1, 2, 3] | sum }} {{ [3, 9] | max }}"),
            "[('b', 1), ('a', 2)] 6 9");
  EXPECT_EQ(render_source("{{ ['a', 'b'] | map('upper') | join }}"), "AB");
}

TEST(Interpreter, ToJsonMatchesHuggingFace) {
  const std::string vars = R"({"x": {"b": [1, 2.0, "é\n\""], "a": null, "t": true, "e": {}}})";
  EXPECT_EQ(render_source("{{ x | tojson }}", vars), R"({"b": [1, 2.0, "é\n\""], "a": null, "t": true, "e": {}})");
  EXPECT_EQ(render_source("{{ x | tojson(indent=2) }}", vars),
            "{\n  \"b\": [\n    1,\n    2.0,\n    \"é\\n\\\"\"\n  ],\n  \"a\": null,\n  \"t\": true,\n  \"e\": {}\n}");
  EXPECT_EQ(render_source("{{ x | tojson(sort_keys=true, separators=(',', ':')) }}", vars),
            R"({"a":null,"b":[1,2.0,"é\n\""],"e":{},"t":true})");
  EXPECT_EQ(render_source("{{ 'é' | tojson(ensure_ascii=true) }}"), "\"\\u00e9\"");
}

TEST(Interpreter, StringAndDictMethods) {
  EXPECT_EQ(render_source("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}{{ ' a '.strip() }}"
                          "{{ 'xxaxx'.lstrip('x') }}{{ 'a,b,c'.split(',') }}{{ 'a b'.split() }}{{ 'a,b,c'.rsplit(',', 1) }}"),
            "TrueTrueaaxx['a', 'b', 'c']['a', 'b']['a,b', 'c']");
  EXPECT_EQ(render_source("{{ 'aaa'.replace('a', 'b', 2) }}{{ 'Hi'.upper() }}{{ '{} and {x}'.format(1, x=2) }}"
                          "{{ 'hello world'.title() }}"),
            "bbaHI1 and 2Hello World");
  EXPECT_EQ(render_source("{{ d.get('a') }}{{ d.get('z', 'dflt') }}{{ d.keys() | list }}{{ d.values() | list }}",
                          R"({"d": {"a": 1}})"),
            "1dflt['a'][1]");
}

TEST(Interpreter, GlobalsAndRaw) {
  EXPECT_EQ(render_source("{{ range(3) | list }}{{ range(1, 7, 2) | list }}"), "[0, 1, 2][1, 3, 5]");
  EXPECT_EQ(render_source("{% raw %}{{ not evaluated }}{% endraw %}"), "{{ not evaluated }}");
  EXPECT_EQ(render_source("{{ dict(a=1)['a'] }}{# a comment #}"), "1");
  EXPECT_EQ(render_source("{% filter upper %}shout{% endfilter %}"), "SHOUT");
  EXPECT_FALSE(render_source("{{ strftime_now('%Y') }}").empty());
}

}  // namespace
}  // namespace surogate::chat_template
