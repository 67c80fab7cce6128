#include "passes/ir/parser.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <type_traits>
#include <unordered_map>

#include "passes/ir/errors.h"

namespace kiln::ir {
namespace {

constexpr auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
constexpr auto is_ident_start = [](char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
};
constexpr auto is_ident_char = [](char c) { return is_ident_start(c) || is_digit(c); };

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), is_digit);
}

[[noreturn]] void fail_at(int line, int column, const std::string& what) {
  throw ParseError("line " + std::to_string(line) + ", column " + std::to_string(column) + ": " +
                   what);
}

enum class Tok { End, Ident, ValueRef, Device, Int, Float, String, Punct, DoubleColon };

struct Token {
  Tok kind = Tok::End;
  std::string text;    // as written, except: no sigil for ValueRef/Device, unescaped String
  std::string source;  // as written, for messages
  int line = 1;
  int column = 1;
};

std::string describe(const Token& t) {
  return t.kind == Tok::End ? "end of input" : "'" + t.source + "'";
}
bool is_word(const Token& t, std::string_view word) {
  return t.kind == Tok::Ident && t.text == word;
}
bool is_bool(const Token& t) {
  return is_word(t, "true") || is_word(t, "false");
}
// inf and nan are identifiers to the lexer; -inf is a Float token.
bool is_double(const Token& t) {
  return t.kind == Tok::Float || is_word(t, "inf") || is_word(t, "nan");
}

// Splits the whole text into tokens up front, so the parser can look ahead freely. `%name` and
// `@device` are single tokens: their spelling is checked as a whole, not as pieces.
class Lexer {
 public:
  explicit Lexer(const std::string& text) : text_(text) {}

  std::vector<Token> run() {
    std::vector<Token> tokens;
    do {
      skip_space_and_comments();
      Token& t = tokens.emplace_back();
      t.line = line_;
      t.column = column_;
      size_t begin = pos_;
      if (pos_ < text_.size()) lex_one(t);  // else an End token
      t.source = text_.substr(begin, pos_ - begin);
    } while (tokens.back().kind != Tok::End);
    return tokens;
  }

 private:
  char at(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  void advance() {
    bool newline = text_[pos_++] == '\n';
    line_ += newline;
    column_ = newline ? 1 : column_ + 1;
  }
  std::string take_while(bool (*pred)(char)) {
    size_t begin = pos_;
    while (pos_ < text_.size() && pred(text_[pos_]))
      advance();
    return text_.substr(begin, pos_ - begin);
  }

  void skip_space_and_comments() {
    for (;;) {
      if (at() == '#') take_while([](char c) { return c != '\n'; });
      if (at() != ' ' && at() != '\t' && at() != '\n' && at() != '\r') return;
      advance();
    }
  }

  void lex_one(Token& t) {
    char c = at();
    if (is_ident_start(c)) {
      t.kind = Tok::Ident;
      t.text = take_while(is_ident_char);
    } else if (is_digit(c) ||
               (c == '-' && (is_digit(at(1)) || text_.compare(pos_, 4, "-inf") == 0))) {
      lex_number(t);
    } else if (c == '%') {
      advance();
      t.kind = Tok::ValueRef;
      t.text = take_while(is_ident_char);
      if (!all_digits(t.text) && !(!t.text.empty() && is_ident_start(t.text[0])))
        fail_at(t.line, t.column,
                "invalid value name '%" + t.text + "' (expected an identifier or a number)");
    } else if (c == '@') {
      advance();
      t.kind = Tok::Device;
      t.text = take_while([](char ch) { return is_ident_char(ch) || ch == ':'; });
    } else if (c == '"') {
      lex_string(t);
    } else if (c == ':' && at(1) == ':') {
      advance();
      advance();
      t.kind = Tok::DoubleColon;
    } else if (std::string_view("()[]{},:=.").find(c) != std::string_view::npos) {
      advance();
      t.kind = Tok::Punct;
      t.text = std::string(1, c);
    } else {
      fail_at(t.line, t.column, std::string("unexpected character '") + c + "'");
    }
  }

  void lex_number(Token& t) {
    size_t begin = pos_;
    if (at() == '-') advance();
    bool is_inf = at() == 'i';  // -inf; a bare inf is an identifier
    bool is_float = is_inf;
    if (is_inf) {
      take_while(is_ident_char);
    } else {
      take_while(is_digit);
      if (at() == '.') {
        is_float = true;
        advance();
        take_while(is_digit);
      }
      if (at() == 'e' || at() == 'E') {
        is_float = true;
        advance();
        if (at() == '+' || at() == '-') advance();
        if (!is_digit(at())) fail_at(t.line, t.column, "malformed number: missing exponent digits");
        take_while(is_digit);
      }
    }
    t.text = text_.substr(begin, pos_ - begin);
    if (is_ident_char(at()) || (is_inf && t.text != "-inf"))
      fail_at(t.line, t.column, "malformed number '" + t.text + take_while(is_ident_char) + "'");
    t.kind = is_float ? Tok::Float : Tok::Int;
  }

  void lex_string(Token& t) {
    advance();  // opening quote
    t.kind = Tok::String;
    for (;;) {
      if (pos_ >= text_.size()) fail_at(t.line, t.column, "unterminated string");
      char c = at();
      if (c == '"') {
        advance();
        return;
      }
      if (c == '\\') {
        int line = line_, column = column_;
        advance();
        char escaped = at();
        if (escaped != '"' && escaped != '\\')
          fail_at(line, column, "unknown escape in string (only \\\" and \\\\ are allowed)");
        c = escaped;
      }
      t.text += c;
      advance();
    }
  }

  const std::string& text_;
  size_t pos_ = 0;
  int line_ = 1;
  int column_ = 1;
};

std::string valid_dtypes() {
  std::string out;
  for (int i = 0; i <= static_cast<int>(DType::Complex128); ++i)
    out += std::string(i ? ", " : "") + dtype_name(static_cast<DType>(i));
  return out;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  std::unique_ptr<Graph> parse() {
    graph_ = std::make_unique<Graph>();
    if (!is_word(peek(), "graph")) fail_expected("'graph' at the start of the text");
    take();
    expect('(', "after 'graph'");
    parse_list(')', "after the graph inputs", [&] {
      const Token& name = expect_value_name("a graph input '%name'");
      expect(':', "after " + describe(name));
      TensorType type = parse_type();
      define(name, graph_->add_input(std::move(type)));
    });
    expect(':', "after the graph inputs");
    for (;;) {
      if (is_word(peek(), "return") && is_punct(peek(1), '(')) break;
      if (peek().kind == Tok::ValueRef ||
          (peek().kind == Tok::Ident && peek(1).kind == Tok::DoubleColon)) {
        parse_node();
      } else {
        fail_expected("a node '%name : type = ns::op(...)' or 'return (...)'");
      }
    }
    take();  // return
    take();  // (
    std::vector<Value*> outputs;
    parse_list(')', "after the graph outputs",
               [&] { outputs.push_back(use(expect_value_name("a graph output '%name'"))); });
    graph_->set_outputs(std::move(outputs));
    if (peek().kind != Tok::End) fail_expected("end of input after the return statement");
    return std::move(graph_);
  }

 private:
  const Token& peek(size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  const Token& take() {
    const Token& t = peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return t;
  }
  static bool is_punct(const Token& t, char c) { return t.kind == Tok::Punct && t.text[0] == c; }
  bool accept(char c) {
    if (!is_punct(peek(), c)) return false;
    take();
    return true;
  }

  [[noreturn]] void fail(const Token& t, const std::string& what) {
    fail_at(t.line, t.column, what);
  }
  [[noreturn]] void fail_expected(const std::string& what) {
    fail(peek(), "expected " + what + ", found " + describe(peek()));
  }

  void expect(char c, const std::string& where) {
    if (!accept(c)) fail_expected(std::string("'") + c + "' " + where);
  }
  // Reads `item, item, ...<close>`, possibly empty, after the opening bracket.
  template <typename F>
  void parse_list(char close, const std::string& where, F item) {
    if (accept(close)) return;
    do
      item();
    while (accept(','));
    expect(close, where);
  }
  const Token& expect_value_name(const std::string& what) {
    if (peek().kind != Tok::ValueRef) fail_expected(what);
    return take();
  }

  Value* use(const Token& name) {
    auto it = values_.find(name.text);
    if (it == values_.end()) fail(name, "use of undefined value '%" + name.text + "'");
    return it->second.first;
  }

  void check_not_defined(const Token& name) {
    auto it = values_.find(name.text);
    if (it != values_.end())
      fail(name, "redefinition of value '%" + name.text + "' (first defined on line " +
                     std::to_string(it->second.second) + ")");
  }

  void define(const Token& name, Value* value) {
    check_not_defined(name);
    if (!all_digits(name.text)) value->set_name(name.text);
    values_[name.text] = {value, name.line};
  }

  TensorType parse_type() {
    if (peek().kind != Tok::Ident) fail_expected("a type such as f32[2,3]");
    const Token& dtype_token = take();
    auto dtype = parse_dtype(dtype_token.text);
    if (!dtype)
      fail(dtype_token,
           "unknown dtype '" + dtype_token.text + "' (valid dtypes: " + valid_dtypes() + ")");
    TensorType type;
    type.dtype = *dtype;
    expect('[', "after the dtype");
    type.sizes = parse_int_list(']', "a size");
    type.strides = accept('{') ? parse_int_list('}', "a stride") : contiguous_strides(type.sizes);
    if (peek().kind == Tok::Device) {
      const Token& device_token = take();
      auto device = parse_device(device_token.text);
      if (!device)
        fail(device_token,
             "unknown device '" + device_token.text + "' (valid devices: cpu, cuda, cuda:N, meta)");
      type.device = *device;
    }
    return type;
  }

  std::vector<int64_t> parse_int_list(char close, const std::string& what) {
    std::vector<int64_t> items;
    parse_list(close, "to close the list", [&] {
      if (peek().kind != Tok::Int) fail_expected(what + " (an integer)");
      items.push_back(number<int64_t>(take()));
    });
    return items;
  }

  template <typename T>
  T number(const Token& t) {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    if constexpr (std::is_same_v<T, double>) {
      if (t.text == "inf" || t.text == "-inf") return t.text[0] == '-' ? -kInf : kInf;
      if (t.text == "nan") return std::numeric_limits<double>::quiet_NaN();
    }
    T v = 0;
    auto [end, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (ec != std::errc() || end != t.text.data() + t.text.size())
      fail(t, "number '" + t.text + "' is out of range for " +
                  (std::is_same_v<T, double> ? "double" : "int64"));
    return v;
  }

  void parse_node() {
    std::vector<Token> names;
    std::vector<TensorType> types;
    if (peek().kind == Tok::ValueRef) {
      do {
        const Token& name = expect_value_name("a node output '%name'");
        check_not_defined(name);
        for (const Token& earlier : names) {
          if (earlier.text == name.text)
            fail(name, "value '%" + name.text + "' appears twice among the node's outputs");
        }
        expect(':', "after " + describe(name));
        names.push_back(name);
        types.push_back(parse_type());
      } while (accept(','));
      expect('=', "after the node outputs");
    }
    std::string op = parse_op_name();
    expect('(', "after the operator name '" + op + "'");
    std::vector<Value*> inputs;
    parse_list(')', "after the inputs of " + op,
               [&] { inputs.push_back(use(expect_value_name("an input '%name'"))); });
    AttrList attrs;
    if (accept('{')) {
      parse_list('}', "after the attributes", [&] {
        if (peek().kind != Tok::Ident) fail_expected("an attribute name");
        const Token& key = take();
        for (const auto& [existing, value] : attrs) {
          if (existing == key.text) fail(key, "attribute '" + key.text + "' is given twice");
        }
        expect('=', "after the attribute name '" + key.text + "'");
        attrs.emplace_back(key.text, parse_attr());
      });
    }
    Node* node =
        graph_->append(std::move(op), std::move(inputs), std::move(types), std::move(attrs));
    for (size_t i = 0; i < names.size(); ++i)
      define(names[i], node->output(i));
  }

  std::string parse_op_name() {
    if (peek().kind != Tok::Ident) fail_expected("an operator name such as aten::relu");
    std::string name = take().text;
    if (peek().kind != Tok::DoubleColon) fail_expected("'::' in the operator name '" + name + "'");
    take();
    if (peek().kind != Tok::Ident) fail_expected("an operator name after '" + name + "::'");
    name += "::" + take().text;
    if (accept('.')) {
      if (peek().kind != Tok::Ident) fail_expected("an overload name after '" + name + ".'");
      name += "." + take().text;
    }
    return name;
  }

  Attr parse_attr() {
    const Token& t = peek();
    if (t.kind == Tok::Int) return number<int64_t>(take());
    if (is_double(t)) return number<double>(take());
    if (is_bool(t)) return take().text == "true";
    if (t.kind == Tok::String) return take().text;
    if (is_punct(t, '[')) return parse_attr_list();
    if (!is_word(t, "None"))
      fail_expected("an attribute value (None, true, false, a number, a string or a list)");
    take();
    return NoneAttr{};
  }

  // A list is all booleans or all numbers; one double among the numbers makes them all doubles.
  Attr parse_attr_list() {
    take();  // [
    std::vector<int64_t> ints;
    std::vector<double> doubles;  // every number so far, in case one turns out to be a double
    std::vector<bool> bools;
    bool any_double = false;
    parse_list(']', "to close the list", [&] {
      const Token& t = peek();
      if (!is_bool(t) && !is_double(t) && t.kind != Tok::Int)
        fail_expected("a list element (an integer, a float, true or false)");
      if (is_bool(t) ? !doubles.empty() : !bools.empty())
        fail(t, "list mixes booleans and numbers at " + describe(t));
      take();
      if (is_bool(t)) {
        bools.push_back(t.text == "true");
      } else if (is_double(t)) {
        any_double = true;
        doubles.push_back(number<double>(t));
      } else {
        ints.push_back(number<int64_t>(t));
        doubles.push_back(static_cast<double>(ints.back()));
      }
    });
    if (!bools.empty()) return bools;
    if (any_double) return doubles;
    return ints;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  std::unique_ptr<Graph> graph_;
  std::unordered_map<std::string, std::pair<Value*, int>> values_;  // value, line defined
};

}  // namespace

std::unique_ptr<Graph> parse_graph(const std::string& text) {
  return Parser(Lexer(text).run()).parse();
}

}  // namespace kiln::ir
