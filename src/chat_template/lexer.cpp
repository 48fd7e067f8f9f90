// Jinja lexer with Hugging Face's whitespace settings (see lexer.h). Text is scanned for the next
// tag opener; inside a tag, tokens are read until the closing delimiter at bracket depth zero, so
// `}}` inside a dict literal or `%}` inside a string does not end the tag.
#include "chat_template/lexer.h"

#include <algorithm>
#include <cctype>

#include "chat_template/python_strings.h"
#include "chat_template/template_error.h"

namespace surogate::chat_template {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  return out;
}

class Lexer {
public:
  Lexer(std::string source, const std::string& source_name) : source_(std::move(source)), source_name_(source_name) {
    if (!source_.empty() && source_.back() == '\n') source_.pop_back();
  }

  std::vector<Token> run() {
    while (true) {
      size_t opener = find_opener(position_);
      std::string text = source_.substr(position_, (opener == std::string::npos ? source_.size() : opener) - position_);
      size_t text_line = line_;
      apply_leading_control(text);
      if (opener == std::string::npos) {
        emit_text(std::move(text), text_line);
        break;
      }
      char opener_kind = source_[opener + 1];
      char modifier = opener + 2 < source_.size() ? source_[opener + 2] : '\0';
      if (modifier == '-') {
        size_t end = text.size();
        while (end > 0 && is_space(text[end - 1])) --end;
        text.resize(end);
      } else if (opener_kind != '{' && modifier != '+') {
        size_t line_start = text.rfind('\n');
        line_start = line_start == std::string::npos ? 0 : line_start + 1;
        if (line_start > 0 || line_starting_) {
          bool only_blanks = std::all_of(text.begin() + static_cast<std::ptrdiff_t>(line_start), text.end(),
                                         [](char c) { return c == ' ' || c == '\t'; });
          if (only_blanks) text.resize(line_start);
        }
      }
      emit_text(std::move(text), static_cast<int>(text_line));
      advance_to(opener + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0));
      if (opener_kind == '#') {
        lex_comment();
      } else {
        lex_tag(opener_kind == '{');
      }
    }
    tokens_.push_back(Token{TokenKind::kEnd, "", static_cast<int>(line_)});
    return std::move(tokens_);
  }

private:
  [[noreturn]] void fail(const std::string& message) const {
    fail_template(source_name_, static_cast<int>(line_), message);
  }

  size_t find_opener(size_t from) const {
    size_t at = from;
    while (true) {
      at = source_.find('{', at);
      if (at == std::string::npos || at + 1 >= source_.size()) return std::string::npos;
      char next = source_[at + 1];
      if (next == '{' || next == '%' || next == '#') return at;
      ++at;
    }
  }

  void advance_to(size_t new_position) {
    line_ += static_cast<size_t>(std::count(source_.begin() + static_cast<std::ptrdiff_t>(position_),
                                            source_.begin() + static_cast<std::ptrdiff_t>(new_position), '\n'));
    position_ = new_position;
  }

  // What the previous closing tag asks of the text after it.
  void apply_leading_control(std::string& text) {
    if (strip_next_) {
      size_t begin = 0;
      while (begin < text.size() && is_space(text[begin])) ++begin;
      text.erase(0, begin);
    } else if (trim_next_newline_ && !text.empty() && text[0] == '\n') {
      text.erase(0, 1);
    }
    strip_next_ = false;
    trim_next_newline_ = false;
  }

  void emit_text(std::string text, size_t line) {
    if (!text.empty()) tokens_.push_back(Token{TokenKind::kText, std::move(text), static_cast<int>(line)});
  }

  // After a closing delimiter at `close_end`: remember the whitespace rule for the next text.
  void finish_tag(size_t close_end, char modifier, bool is_block) {
    advance_to(close_end);
    line_starting_ = false;
    if (modifier == '-') {
      strip_next_ = true;
      size_t end = position_;
      while (end < source_.size() && is_space(source_[end])) ++end;
      line_starting_ = end > position_ && source_[end - 1] == '\n';
    } else if (is_block && modifier != '+') {
      trim_next_newline_ = true;
      line_starting_ = position_ < source_.size() && source_[position_] == '\n';
    }
  }

  void lex_comment() {
    size_t close = source_.find("#}", position_);
    if (close == std::string::npos) fail("the comment '{#' is never closed with '#}'");
    char modifier = close > position_ && (source_[close - 1] == '-' || source_[close - 1] == '+') ? source_[close - 1]
                                                                                                  : '\0';
    finish_tag(close + 2, modifier, true);
  }

  void lex_tag(bool is_variable) {
    size_t first_token = tokens_.size();
    tokens_.push_back(Token{is_variable ? TokenKind::kVariableBegin : TokenKind::kBlockBegin, "",
                            static_cast<int>(line_)});
    std::vector<char> brackets;
    while (true) {
      while (position_ < source_.size() && is_space(source_[position_])) advance_to(position_ + 1);
      if (position_ >= source_.size())
        fail(is_variable ? "'{{' is never closed with '}}'" : "'{%' is never closed with '%}'");
      std::string_view rest = std::string_view(source_).substr(position_);
      const std::string_view close = is_variable ? "}}" : "%}";
      if (brackets.empty()) {
        char modifier = '\0';
        size_t length = 0;
        if (rest.starts_with(close)) {
          length = 2;
        } else if ((rest[0] == '-' || (!is_variable && rest[0] == '+')) && rest.substr(1).starts_with(close)) {
          modifier = rest[0];
          length = 3;
        }
        if (length) {
          tokens_.push_back(Token{is_variable ? TokenKind::kVariableEnd : TokenKind::kBlockEnd, "",
                                  static_cast<int>(line_)});
          finish_tag(position_ + length, modifier, !is_variable);
          if (!is_variable) maybe_lex_raw(first_token);
          return;
        }
      }
      char c = rest[0];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t end = 1;
        while (end < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[end])) || rest[end] == '_')) ++end;
        push(TokenKind::kName, std::string(rest.substr(0, end)), end);
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        lex_number(rest);
      } else if (c == '\'' || c == '"') {
        lex_string(rest);
      } else {
        static const std::string_view operators[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%",
                                                     "~",  "<",  ">",  "=",  ".",  ",",  ":", "|", "(", ")", "[",
                                                     "]",  "{",  "}"};
        bool matched = false;
        for (std::string_view op : operators) {
          if (rest.starts_with(op)) {
            if (op == "(" || op == "[" || op == "{") brackets.push_back(op[0]);
            if (op == ")" || op == "]" || op == "}") {
              char expected = op == ")" ? '(' : op == "]" ? '[' : '{';
              if (brackets.empty() || brackets.back() != expected) fail("unexpected '" + std::string(op) + "'");
              brackets.pop_back();
            }
            push(TokenKind::kOperator, std::string(op), op.size());
            matched = true;
            break;
          }
        }
        if (!matched) fail("unexpected character '" + std::string(1, c) + "' inside a tag");
      }
    }
  }

  void push(TokenKind kind, std::string text, size_t length) {
    tokens_.push_back(Token{kind, std::move(text), static_cast<int>(line_)});
    advance_to(position_ + length);
  }

  void lex_number(std::string_view rest) {
    size_t end = 0;
    auto digits = [&] {
      while (end < rest.size() && (std::isdigit(static_cast<unsigned char>(rest[end])) || rest[end] == '_')) ++end;
    };
    digits();
    bool is_float = false;
    if (end + 1 < rest.size() && rest[end] == '.' && std::isdigit(static_cast<unsigned char>(rest[end + 1]))) {
      is_float = true;
      ++end;
      digits();
    }
    if (end < rest.size() && (rest[end] == 'e' || rest[end] == 'E')) {
      size_t exponent = end + 1;
      if (exponent < rest.size() && (rest[exponent] == '+' || rest[exponent] == '-')) ++exponent;
      if (exponent < rest.size() && std::isdigit(static_cast<unsigned char>(rest[exponent]))) {
        is_float = true;
        end = exponent;
        digits();
      }
    }
    std::string text(rest.substr(0, end));
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    push(is_float ? TokenKind::kFloat : TokenKind::kInteger, std::move(text), end);
  }

  void lex_string(std::string_view rest) {
    char quote = rest[0];
    std::u32string value;
    size_t i = 1;
    auto hex_value = [&](size_t start, size_t count) {
      if (start + count > rest.size()) fail("truncated escape sequence in a string literal");
      char32_t code_point = 0;
      for (size_t k = start; k < start + count; ++k) {
        char h = rest[k];
        if (!std::isxdigit(static_cast<unsigned char>(h))) fail("invalid hexadecimal escape in a string literal");
        code_point = code_point * 16 + static_cast<char32_t>(std::isdigit(static_cast<unsigned char>(h))
                                                                 ? h - '0'
                                                                 : std::tolower(static_cast<unsigned char>(h)) - 'a' + 10);
      }
      return code_point;
    };
    std::string pending;  // raw UTF-8 bytes not yet decoded
    auto flush = [&] {
      std::u32string decoded = utf8_decode(pending);
      value += decoded;
      pending.clear();
    };
    while (true) {
      if (i >= rest.size()) fail("a string literal is never closed");
      char c = rest[i];
      if (c == quote) break;
      if (c != '\\') {
        pending.push_back(c);
        ++i;
        continue;
      }
      flush();
      if (i + 1 >= rest.size()) fail("a string literal is never closed");
      char escape = rest[i + 1];
      i += 2;
      switch (escape) {
        case 'n': value.push_back(U'\n'); break;
        case 't': value.push_back(U'\t'); break;
        case 'r': value.push_back(U'\r'); break;
        case 'a': value.push_back(U'\a'); break;
        case 'b': value.push_back(U'\b'); break;
        case 'f': value.push_back(U'\f'); break;
        case 'v': value.push_back(U'\v'); break;
        case '\\': value.push_back(U'\\'); break;
        case '\'': value.push_back(U'\''); break;
        case '"': value.push_back(U'"'); break;
        case '\n': break;  // a backslash-newline continues the line
        case 'x': value.push_back(hex_value(i, 2)); i += 2; break;
        case 'u': value.push_back(hex_value(i, 4)); i += 4; break;
        case 'U': value.push_back(hex_value(i, 8)); i += 8; break;
        case 'N': fail("the \\N{...} escape in string literals is not supported");
        default:
          if (escape >= '0' && escape <= '7') {
            char32_t code_point = static_cast<char32_t>(escape - '0');
            for (int k = 0; k < 2 && i < rest.size() && rest[i] >= '0' && rest[i] <= '7'; ++k, ++i)
              code_point = code_point * 8 + static_cast<char32_t>(rest[i] - '0');
            value.push_back(code_point);
          } else {
            value.push_back(U'\\');
            pending.push_back(escape);
          }
      }
    }
    flush();
    push(TokenKind::kString, utf8_encode(value), i + 1);
  }

  // `{% raw %}...{% endraw %}`: everything between is text.
  void maybe_lex_raw(size_t first_token) {
    if (tokens_.size() - first_token != 3 || tokens_[first_token + 1].kind != TokenKind::kName ||
        tokens_[first_token + 1].text != "raw")
      return;
    int raw_line = tokens_[first_token].line;
    tokens_.resize(first_token);
    size_t search = position_;
    while (true) {
      size_t opener = source_.find("{%", search);
      if (opener == std::string::npos) fail_template(source_name_, raw_line, "'{% raw %}' is never closed with '{% endraw %}'");
      size_t at = opener + 2;
      char open_modifier = source_[at] == '-' || source_[at] == '+' ? source_[at] : '\0';
      if (open_modifier) ++at;
      while (at < source_.size() && is_space(source_[at])) ++at;
      if (source_.compare(at, 6, "endraw") != 0) {
        search = opener + 2;
        continue;
      }
      at += 6;
      while (at < source_.size() && is_space(source_[at])) ++at;
      char close_modifier = '\0';
      if (at < source_.size() && (source_[at] == '-' || source_[at] == '+')) close_modifier = source_[at++];
      if (source_.compare(at, 2, "%}") != 0) {
        search = opener + 2;
        continue;
      }
      std::string text = source_.substr(position_, opener - position_);
      size_t text_line = line_;
      apply_leading_control(text);
      if (open_modifier == '-') {
        size_t end = text.size();
        while (end > 0 && is_space(text[end - 1])) --end;
        text.resize(end);
      }
      emit_text(std::move(text), text_line);
      finish_tag(at + 2, close_modifier, true);
      return;
    }
  }

  std::string source_;
  const std::string& source_name_;
  size_t position_ = 0;
  size_t line_ = 1;
  bool strip_next_ = false;
  bool trim_next_newline_ = false;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize_template(std::string_view source, const std::string& source_name) {
  return Lexer(normalize_newlines(source), source_name).run();
}

}  // namespace surogate::chat_template
