// Unsupported syntax and runtime failures become one UserError naming the template, the line and
// the feature; undefined values behave like jinja2's default Undefined.
#include <gtest/gtest.h>

#include "core/error.h"
#include "render_helper.h"

namespace surogate::chat_template {
namespace {

using testing::render_source;

std::string error_of(const std::string& source, const std::string& variables = "{}") {
  try {
    render_source(source, variables);
  } catch (const UserError& error) {
    return error.what();
  }
  return "no error";
}

TEST(Errors, UnsupportedTagsNameTheFeatureAndLine) {
  EXPECT_EQ(error_of("a\n{% include 'x.jinja' %}"),
            "chat template test.jinja, line 2: the Jinja tag '{% include %}' is not supported in chat templates");
  EXPECT_NE(error_of("{% extends 'base' %}").find("'{% extends %}' is not supported"), std::string::npos);
  EXPECT_NE(error_of("{% import 'm' as m %}").find("'{% import %}'"), std::string::npos);
  EXPECT_NE(error_of("\n\n{% frobnicate %}").find("line 3: unknown Jinja tag '{% frobnicate %}'"), std::string::npos);
  EXPECT_NE(error_of("{% for x in y recursive %}{% endfor %}").find("recursive"), std::string::npos);
}

TEST(Errors, UnknownFiltersAndTestsAreReportedAtParseTime) {
  EXPECT_EQ(error_of("\n{{ x | lenght }}"),
            "chat template test.jinja, line 2: unknown filter 'lenght' (did you mean 'length'?)");
  EXPECT_NE(error_of("{{ x is frob }}").find("unknown test 'frob'"), std::string::npos);
}

TEST(Errors, SyntaxErrors) {
  EXPECT_NE(error_of("{% if x %}open").find("'{% if %}' tag at line 1 is never closed"), std::string::npos);
  EXPECT_NE(error_of("{% endfor %}").find("unexpected '{% endfor %}'"), std::string::npos);
  EXPECT_NE(error_of("{{ 'abc }}").find("never closed"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 +  }}").find("expected an expression"), std::string::npos);
  EXPECT_NE(error_of("{% break %}").find("outside of a for loop"), std::string::npos);
}

TEST(Errors, UndefinedSemantics) {
  EXPECT_EQ(render_source("[{{ missing }}]{% for x in missing %}x{% endfor %}{{ missing | length }}"
                          "{{ 'y' if not missing }}"),
            "[]0y");
  EXPECT_EQ(error_of("{{ missing.attribute }}"), "chat template test.jinja, line 1: 'missing' is undefined");
  EXPECT_NE(error_of("{{ missing + 1 }}").find("'missing' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{{ m.nothing.deeper }}", R"({"m": {}})").find("'dict object' has no attribute 'nothing'"),
            std::string::npos);
}

TEST(Errors, RuntimeTypeErrorsAndRaiseException) {
  EXPECT_NE(error_of("\n{{ 'a' + 1 }}").find("line 2: unsupported operand type(s) for +: 'str' and 'int'"),
            std::string::npos);
  EXPECT_EQ(error_of("{{ raise_exception('Only user and assistant roles') }}"),
            "chat template test.jinja, line 1: the template raised an error: Only user and assistant roles");
  EXPECT_NE(error_of("{{ xs.append(1) }}", R"({"xs": []})").find("immutable sandbox"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 / 0 }}").find("division by zero"), std::string::npos);
  EXPECT_NE(error_of("{{ f() }}", R"({"f": 1})").find("'int' object is not callable"), std::string::npos);
}

// A template from a model folder that recurses without end, or nests expressions absurdly deep,
// is an error naming the template and line, never a stack overflow.
TEST(Errors, RunawayRecursionAndDeepNestingAreErrorsNotCrashes) {
  EXPECT_NE(error_of("{% macro f(x) %}{{ f(x) }}{% endmacro %}\n{{ f(1) }}").find("nest more than 200 deep"),
            std::string::npos);
  // Bounded recursion still works.
  EXPECT_EQ(error_of("{% macro count(n) %}{% if n > 0 %}{{ n }}{{ count(n - 1) }}{% endif %}{% endmacro %}"
                     "{{ count(50) }}"),
            "no error");
  const std::string deep = "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
  EXPECT_NE(error_of(deep).find("chat template test.jinja, line 1"), std::string::npos);
  const std::string deep_list = "{{ " + std::string(100000, '[') + std::string(100000, ']') + " }}";
  EXPECT_NE(error_of(deep_list).find("chat template test.jinja, line 1"), std::string::npos);
  std::string chain = "{{ 1";
  for (int i = 0; i < 100000; ++i) chain += " + 1";
  EXPECT_NE(error_of(chain + " }}").find("chains more than 1000 operators"), std::string::npos);
}

// Found by fuzz_chat_template: digits that do not fit 64 bits escaped as std::out_of_range.
TEST(Errors, IndicesTooLargeForSixtyFourBitsNameTheLine) {
  EXPECT_EQ(error_of("\n{{ x.99999999999999999999 }}"),
            "chat template test.jinja, line 2: the index .99999999999999999999 is too large");
  EXPECT_NE(error_of("{{ [{'a': 1}] | map(attribute='a.99999999999999999999') | list }}")
                .find("line 1: attribute 'a.99999999999999999999': the index 99999999999999999999 is too large"),
            std::string::npos);
  EXPECT_NE(error_of("{{ '{99999999999999999999}'.format(1) }}").find("line 1: format(): no positional argument 99999999999999999999"),
            std::string::npos);
}

// Found by fuzz_chat_template (UBSan: signed overflow in `2 ** 76`); the same class elsewhere.
// Python's ints are unbounded, the interpreter's are int64: no result is an error, never UB.
TEST(Errors, IntegerOverflowIsAnErrorNamingTheLine) {
  EXPECT_EQ(error_of("\n{{ 2 ** 76 }}"), "chat template test.jinja, line 2: integer overflow: 2 ** 76 does not fit in 64 bits");
  EXPECT_NE(error_of("{{ 9223372036854775807 + 1 }}").find("integer overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ -9223372036854775807 - 2 }}").find("integer overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ 4611686018427387904 * 2 }}").find("integer overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ (-9223372036854775807 - 1) // -1 }}").find("integer overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ -(-9223372036854775807 - 1) }}").find("integer overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ (-9223372036854775807 - 1) | abs }}").find("integer overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ [9223372036854775807, 1] | sum }}").find("sum(): integer overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ 1e300 | int }}").find("int(): 1e+300 does not fit in 64 bits"), std::string::npos);
  EXPECT_NE(error_of("{{ '%d' | format(1e300) }}").find("does not fit in 64 bits"), std::string::npos);
  // What does fit keeps Python's results, and a huge exponent of 1 no longer loops 10**18 times.
  EXPECT_EQ(testing::render_source("{{ 2 ** 62 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ (-9223372036854775807 - 1) % -1 }} "
                                   "{{ 1 ** 1000000000000000000 }} {{ [9223372036854775806, 1] | sum }} {{ 2.9 | int }}"),
            "4611686018427387904 -4 2 -2 0 1 9223372036854775807 2");
  EXPECT_EQ(testing::render_source("{{ range(0, 9223372036854775807, 4611686018427387904) | list }} "
                                   "{{ 'abc'[0::9223372036854775807] }}"),
            "[0, 4611686018427387904] a");
}

}  // namespace
}  // namespace surogate::chat_template
