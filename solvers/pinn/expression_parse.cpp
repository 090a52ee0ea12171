// Lexing and Pratt parsing of expressions, the error excerpt and the canonical rendering.

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <utility>

#include "solvers/pinn/expression_ast.h"

namespace eddy::pinn {

Expression::Expression(std::shared_ptr<const ExpressionSource> source) : source_(std::move(source)) {}
const std::string& Expression::text() const { return source_->text; }
const std::string& Expression::where() const { return source_->where; }

void fail_at(const ExpressionSource& source, size_t position, size_t length,
             const std::string& message) {
  const std::string& text = source.text;
  position = std::min(position, text.size());
  // A block scalar in YAML can span lines: show only the line that holds the fault.
  size_t line_begin = 0;
  if (position > 0 && text.rfind('\n', position - 1) != std::string::npos) {
    line_begin = text.rfind('\n', position - 1) + 1;
  }
  const size_t line_end = std::min(text.find('\n', position), text.size());
  std::string line = text.substr(line_begin, line_end - line_begin);
  // Tabs would shift the caret by a terminal-dependent amount.
  std::replace(line.begin(), line.end(), '\t', ' ');
  length = std::max<size_t>(1, std::min(length, line_end - position));
  const std::string marker = std::string(position - line_begin, ' ') + "^" + std::string(length - 1, '~');
  const std::string prefix = source.where.empty() ? "" : source.where + ": ";
  throw Error(prefix + message + "\n  " + line + "\n  " + marker);
}

namespace {

struct Token {
  enum class Kind { number, identifier, punctuation, end };
  Kind kind;
  std::string text;
  size_t position;
  double number = 0;
};

std::string describe(const Token& token) {
  return token.kind == Token::Kind::end ? "the end of the expression" : "'" + token.text + "'";
}

bool is_identifier_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

std::vector<Token> tokenize(const ExpressionSource& source) {
  const std::string& text = source.text;
  std::vector<Token> tokens;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (is_digit(c) || (c == '.' && i + 1 < text.size() && is_digit(text[i + 1]))) {
      size_t end = i;
      while (end < text.size() && (is_digit(text[end]) || text[end] == '.')) ++end;
      // An exponent only when digits follow, so that `2e` is the number 2 and then a name.
      if (end < text.size() && (text[end] == 'e' || text[end] == 'E')) {
        size_t digits = end + 1;
        if (digits < text.size() && (text[digits] == '+' || text[digits] == '-')) ++digits;
        if (digits < text.size() && is_digit(text[digits])) {
          end = digits;
          while (end < text.size() && is_digit(text[end])) ++end;
        }
      }
      Token token{Token::Kind::number, text.substr(i, end - i), i};
      // from_chars, unlike strtod, does not depend on the locale's decimal separator.
      const char* first = text.data() + i;
      auto [stop, status] = std::from_chars(first, text.data() + end, token.number);
      if (status != std::errc() || stop != text.data() + end) {
        fail_at(source, i, end - i, "malformed number '" + token.text + "'");
      }
      tokens.push_back(std::move(token));
      i = end;
    } else if (is_identifier_start(c)) {
      size_t end = i;
      while (end < text.size() && is_identifier_char(text[end])) ++end;
      tokens.push_back({Token::Kind::identifier, text.substr(i, end - i), i});
      i = end;
    } else {
      static const std::vector<std::string> punctuation = {
          "==", "!=", "<=", ">=", "&&", "||", "+", "-", "*", "/", "^", "(", ")", "[", "]", ",",
          "<", ">", "!"};
      auto match = std::find_if(punctuation.begin(), punctuation.end(), [&](const std::string& p) {
        return text.compare(i, p.size(), p) == 0;
      });
      if (match == punctuation.end()) {
        const std::string hint = c == '=' ? " (use '==' to compare)"
                                 : c == '&' ? " (use '&&' for 'and')"
                                 : c == '|' ? " (use '||' for 'or')"
                                            : "";
        // A byte of a multi-byte UTF-8 character printed alone showed as a broken glyph.
        const auto byte = static_cast<unsigned char>(c);
        fail_at(source, i, 1, byte < 0x80 ? cat("unexpected character '", c, "'", hint)
                                          : cat("unexpected non-ASCII character (byte 0x", std::hex, int(byte),
                                                "); names are ASCII letters, digits and _"));
      }
      tokens.push_back({Token::Kind::punctuation, *match, i});
      i += match->size();
    }
  }
  tokens.push_back({Token::Kind::end, "", text.size()});
  return tokens;
}

struct InfixOperator {
  Operator op;
  int power;  // binding power: higher binds tighter
  bool right_associative = false;
  bool comparison = false;
};

// From loosest to tightest: || && (prefix !) comparisons + - * / (prefix -) ^.
constexpr int kNotOperandPower = 3;
constexpr int kNegateOperandPower = 7;

// The parser, checker and evaluator recurse over the tree; bounding its depth keeps a
// pathological expression from overflowing the stack. Nesting (parentheses, calls, operands of
// tighter operators) is what the parser recurses on; the tree is also as deep as its longest
// chain of operators, since a + b + c is (a + b) + c, so long chains have a bound of their own.
// 10000 fitted the stack of an optimised build but overflowed it under AddressSanitizer, whose
// frames are larger; 2000 leaves room in both.
constexpr int kMaxNesting = 1000;
constexpr int kMaxTreeDepth = 2000;

const InfixOperator* infix_operator(const Token& token) {
  static const std::vector<std::pair<std::string, InfixOperator>> operators = {
      {"||", {Operator::logical_or, 1}},
      {"&&", {Operator::logical_and, 2}},
      {"==", {Operator::equal, 4, false, true}},
      {"!=", {Operator::not_equal, 4, false, true}},
      {"<", {Operator::less, 4, false, true}},
      {"<=", {Operator::less_equal, 4, false, true}},
      {">", {Operator::greater, 4, false, true}},
      {">=", {Operator::greater_equal, 4, false, true}},
      {"+", {Operator::add, 5}},
      {"-", {Operator::subtract, 5}},
      {"*", {Operator::multiply, 6}},
      {"/", {Operator::divide, 6}},
      {"^", {Operator::power, 8, true}},
  };
  if (token.kind != Token::Kind::punctuation) return nullptr;
  for (const auto& [text, op] : operators) {
    if (text == token.text) return &op;
  }
  return nullptr;
}

bool starts_operand(const Token& token) {
  return token.kind == Token::Kind::number || token.kind == Token::Kind::identifier ||
         token.text == "(" || token.text == "[";
}

class Parser {
 public:
  explicit Parser(const ExpressionSource& source) : source_(source), tokens_(tokenize(source)) {}

  NodePtr parse() {
    if (peek().kind == Token::Kind::end) fail_at(source_, 0, 1, "the expression is empty");
    NodePtr root = parse_expression(0);
    const Token& rest = peek();
    if (rest.kind != Token::Kind::end) {
      if (rest.text == ")" || rest.text == "]") {
        fail_at(source_, rest.position, 1, "this '" + rest.text + "' closes nothing");
      }
      fail_at(source_, rest.position, rest.text.size(),
              "expected an operator or the end of the expression, found " + describe(rest) +
                  (starts_operand(rest) ? " (use '*' to multiply)" : ""));
    }
    return root;
  }

 private:
  const Token& peek() const { return tokens_[next_]; }
  const Token& take() { return tokens_[next_++]; }
  size_t end_of_previous() const { return tokens_[next_ - 1].position + tokens_[next_ - 1].text.size(); }

  NodePtr parse_expression(int min_power) {
    if (++nesting_ > kMaxNesting) {
      fail_at(source_, peek().position, 1, cat("the expression nests more than ", kMaxNesting, " levels deep"));
    }
    NodePtr left = parse_prefix();
    while (const InfixOperator* op = infix_operator(peek())) {
      if (op->power < min_power) break;
      const Token& token = take();
      NodePtr right = parse_expression(op->right_associative ? op->power : op->power + 1);
      if (op->comparison) {
        if (const InfixOperator* next = infix_operator(peek()); next && next->comparison) {
          fail_at(source_, peek().position, peek().text.size(),
                  "comparisons cannot be chained: write (a < b) && (b < c)");
        }
      }
      left = make_operation(Node::Kind::binary, op->op, token, {left, right});
    }
    --nesting_;
    return left;
  }

  NodePtr finish(std::shared_ptr<Node> node) const {
    for (const NodePtr& child : node->children) node->depth = std::max(node->depth, child->depth + 1);
    if (node->depth > kMaxTreeDepth) {
      fail_at(source_, node->position, 1,
              cat("the expression chains more than ", kMaxTreeDepth, " operations (terms of a sum, factors of a "
                  "product, nested calls); split it into helpers"));
    }
    return node;
  }

  NodePtr parse_prefix() {
    const Token& token = take();
    if (token.kind == Token::Kind::number) {
      auto node = make_leaf(Node::Kind::number, token);
      node->number = token.number;
      return node;
    }
    if (token.kind == Token::Kind::identifier) {
      if (peek().text == "(") return parse_call(token);
      auto node = make_leaf(Node::Kind::symbol, token);
      node->name = token.text;
      return node;
    }
    if (token.text == "-") {
      return make_operation(Node::Kind::unary, Operator::negate, token,
                            {parse_expression(kNegateOperandPower)});
    }
    if (token.text == "!") {
      return make_operation(Node::Kind::unary, Operator::logical_not, token,
                            {parse_expression(kNotOperandPower)});
    }
    if (token.text == "(") {
      NodePtr inner = parse_expression(0);
      expect(")", "to close the '(' at column " + std::to_string(column_of(token) + 1));
      return inner;
    }
    if (token.text == "[") {
      auto node = make_leaf(Node::Kind::vector, token);
      node->children = parse_list("]", "in the vector started at column " +
                                           std::to_string(column_of(token) + 1));
      node->end = end_of_previous();
      return finish(node);
    }
    fail_at(source_, token.position, token.text.size(),
            "expected a number, a name, '(' or '[', found " + describe(token));
  }

  NodePtr parse_call(const Token& name) {
    auto node = make_leaf(Node::Kind::call, name);
    node->name = name.text;
    take();  // (
    node->children = parse_list(")", "in the arguments of " + name.text);
    node->end = end_of_previous();
    return finish(node);
  }

  // Comma-separated expressions up to `close`; the opening bracket has been taken.
  std::vector<NodePtr> parse_list(const std::string& close, const std::string& context) {
    std::vector<NodePtr> items;
    if (peek().text == close) {
      fail_at(source_, peek().position, 1, "expected an expression " + context + ", found '" + close + "'");
    }
    while (true) {
      items.push_back(parse_expression(0));
      if (peek().text == ",") {
        take();
        continue;
      }
      expect(close, "or ',' " + context);
      return items;
    }
  }

  void expect(const std::string& text, const std::string& why) {
    const Token& token = peek();
    if (token.text != text || token.kind != Token::Kind::punctuation) {
      fail_at(source_, token.position, std::max<size_t>(1, token.text.size()),
              "expected '" + text + "' " + why + ", found " + describe(token));
    }
    take();
  }

  size_t column_of(const Token& token) const {
    const size_t newline = source_.text.rfind('\n', token.position);
    return newline == std::string::npos ? token.position : token.position - newline - 1;
  }

  std::shared_ptr<Node> make_leaf(Node::Kind kind, const Token& token) const {
    auto node = std::make_shared<Node>();
    node->kind = kind;
    node->position = node->begin = token.position;
    node->length = token.text.size();
    node->end = token.position + token.text.size();
    return node;
  }

  NodePtr make_operation(Node::Kind kind, Operator op, const Token& token,
                         std::vector<NodePtr> operands) const {
    auto node = make_leaf(kind, token);
    node->op = op;
    node->begin = std::min(token.position, operands.front()->begin);
    node->end = operands.back()->end;
    node->children = std::move(operands);
    return finish(node);
  }

  const ExpressionSource& source_;
  std::vector<Token> tokens_;
  size_t next_ = 0;
  int nesting_ = 0;  // of parse_expression calls
};

std::string operator_text(Operator op) {
  switch (op) {
    case Operator::add: return "+";
    case Operator::subtract: case Operator::negate: return "-";
    case Operator::multiply: return "*";
    case Operator::divide: return "/";
    case Operator::power: return "^";
    case Operator::equal: return "==";
    case Operator::not_equal: return "!=";
    case Operator::less: return "<";
    case Operator::less_equal: return "<=";
    case Operator::greater: return ">";
    case Operator::greater_equal: return ">=";
    case Operator::logical_and: return "&&";
    case Operator::logical_or: return "||";
    case Operator::logical_not: return "!";
  }
  return "?";
}

}  // namespace

Expression parse_expression(std::string_view text, std::string_view where) {
  auto source = std::make_shared<ExpressionSource>();
  source->text = std::string(text);
  source->where = std::string(where);
  source->root = Parser(*source).parse();
  return Expression(std::move(source));
}

std::string canonical_text(const Node& node) {
  if (node.kind == Node::Kind::number) {
    char digits[32];
    std::snprintf(digits, sizeof digits, "%.17g", node.number);
    return digits;
  }
  if (node.kind == Node::Kind::symbol) return node.name;
  // Operations as (-a) and (a+b), calls as f(a,b), vectors as [a,b].
  std::string text = node.kind == Node::Kind::call ? node.name : std::string();
  text += node.kind == Node::Kind::vector ? '[' : '(';
  if (node.kind == Node::Kind::unary) text += operator_text(node.op);
  const std::string separator = node.kind == Node::Kind::binary ? operator_text(node.op) : ",";
  for (size_t i = 0; i < node.children.size(); ++i) {
    if (i > 0) text += separator;
    text += canonical_text(*node.children[i]);
  }
  text += node.kind == Node::Kind::vector ? ']' : ')';
  return text;
}

}  // namespace eddy::pinn
