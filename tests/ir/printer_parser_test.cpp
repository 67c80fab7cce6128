#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "passes/ir/errors.h"
#include "passes/ir/parser.h"
#include "passes/ir/printer.h"

namespace kiln::ir {
namespace {

// Parses and prints again: for canonical text the result is the text itself.
std::string reprint(const std::string& text) {
  return print_graph(*parse_graph(text));
}

// The message of the ParseError that parsing `text` throws, or a marker when none is thrown.
std::string parse_error(const std::string& text) {
  try {
    parse_graph(text);
  } catch (const ParseError& e) {
    return e.what();
  }
  return "<no error>";
}

// The first attribute of the only node of a graph whose node carries `attrs`.
Attr only_attr(const std::string& attrs) {
  auto graph = parse_graph("graph(%x : f32[2]):\n  %y : f32[2] = aten::foo(%x) {" + attrs +
                           "}\n  return (%y)\n");
  return graph->nodes().at(0)->attrs().at(0).second;
}

// ---- Printer -------------------------------------------------------------------------------

TEST(PrinterTest, PrintsTheDocumentedFormat) {
  Graph g;
  Value* x = g.add_input(make_contiguous(DType::Float32, {2, 3}), "x");
  g.add_input(make_contiguous(DType::Float32, {4, 3}));  // unnamed: printed by id
  Node* c = g.append("prim::Constant", {}, {make_contiguous(DType::Float32, {4, 3})},
                     {{"index", int64_t{0}}});
  Node* lin = g.append("aten::linear", {x, c->output()}, {make_contiguous(DType::Float32, {2, 4})},
                       {{"bias", NoneAttr{}}});
  Node* mx =
      g.append("aten::max.dim", {lin->output()},
               {make_contiguous(DType::Float32, {2, 4}), make_contiguous(DType::Int64, {2, 4})},
               {{"dim", int64_t{1}}, {"keepdim", false}});
  g.set_outputs({lin->output(), mx->output(0)});
  EXPECT_EQ(print_graph(g),
            "graph(%x : f32[2,3], %1 : f32[4,3]):\n"
            "  %2 : f32[4,3] = prim::Constant() {index=0}\n"
            "  %3 : f32[2,4] = aten::linear(%x, %2) {bias=None}\n"
            "  %4 : f32[2,4], %5 : i64[2,4] = aten::max.dim(%3) {dim=1, keepdim=false}\n"
            "  return (%3, %4)\n");
}

TEST(PrinterTest, ZeroInputGraphPrintsEmptyParentheses) {
  Graph g;
  Node* c =
      g.append("prim::Constant", {}, {make_contiguous(DType::Int64, {})}, {{"index", int64_t{0}}});
  g.add_output(c->output());
  EXPECT_EQ(print_graph(g),
            "graph():\n"
            "  %0 : i64[] = prim::Constant() {index=0}\n"
            "  return (%0)\n");
}

TEST(PrinterTest, OmitsBracesForNodesWithoutAttributes) {
  Graph g;
  Value* x = g.add_input(make_contiguous(DType::Float32, {2}), "x");
  g.add_output(g.append("aten::relu", {x}, {x->type()})->output());
  EXPECT_EQ(print_graph(g), "graph(%x : f32[2]):\n  %1 : f32[2] = aten::relu(%x)\n  return (%1)\n");
}

TEST(PrinterTest, AllDigitNameIsPrintedAsTheId) {
  Graph g;
  Value* x = g.add_input(make_contiguous(DType::Float32, {2}), "7");
  g.add_output(x);
  EXPECT_EQ(print_graph(g), "graph(%0 : f32[2]):\n  return (%0)\n");
}

TEST(PrinterTest, NameThatIsNotAnIdentifierIsPrintedAsTheId) {
  Graph g;
  Value* x = g.add_input(make_contiguous(DType::Float32, {2}), "input.1");
  g.add_output(x);
  EXPECT_EQ(print_graph(g), "graph(%0 : f32[2]):\n  return (%0)\n");
}

TEST(PrinterTest, SharedNamesFallBackToIds) {
  Graph g;
  Value* a = g.add_input(make_contiguous(DType::Float32, {2}), "x");
  Value* b = g.add_input(make_contiguous(DType::Float32, {2}), "x");
  Value* c = g.add_input(make_contiguous(DType::Float32, {2}), "y");
  g.set_outputs({a, b, c});
  EXPECT_EQ(print_graph(g),
            "graph(%0 : f32[2], %1 : f32[2], %y : f32[2]):\n  return (%0, %1, %y)\n");
}

TEST(PrinterTest, NodeWithoutOutputsPrintsAsABareCall) {
  Graph g;
  Value* x = g.add_input(make_contiguous(DType::Float32, {2}), "x");
  g.append("test::sink", {x}, {});
  g.add_output(x);
  EXPECT_EQ(print_graph(g), "graph(%x : f32[2]):\n  test::sink(%x)\n  return (%x)\n");
}

// ---- Round trips -----------------------------------------------------------------------------

TEST(RoundTripTest, NamesAndIds) {
  const std::string text =
      "graph(%x : f32[2,3], %1 : f32[4,3]):\n"
      "  %2 : f32[4,3] = prim::Constant() {index=0}\n"
      "  %hidden : f32[2,4] = aten::linear(%x, %2) {bias=None}\n"
      "  %4 : f32[2,4] = aten::relu(%hidden)\n"
      "  return (%4, %hidden)\n";
  EXPECT_EQ(reprint(text), text);
}

TEST(RoundTripTest, StridesAndDevices) {
  const std::string text =
      "graph(%a : f32[3,2]{1,3}, %b : f16[2,3]@cuda, %c : i64[]@cuda:1, %d : bf16[4]@meta, "
      "%e : b8[2,1]@cpu:0):\n"
      "  %5 : f32[2,3]{1,2}@cuda = aten::permute(%a) {dims=[1,0]}\n"
      "  return (%5, %b, %c, %d, %e)\n";
  EXPECT_EQ(reprint(text), text);
}

TEST(RoundTripTest, EveryAttributeKind) {
  const std::string text =
      "graph(%x : f32[2]):\n"
      "  %1 : f32[2] = aten::foo(%x) {none=None, int=3, neg=-42, min=-9223372036854775808, "
      "small=1.0000000000000001e-05, tenth=0.10000000000000001, inf=inf, ninf=-inf, nan=nan, "
      "yes=true, no=false, str=\"say \\\"hi\\\" \\\\ ok\", empty=\"\", ints=[1,-2,3], "
      "none_list=[], doubles=[0.5,1,-inf], bools=[true,false]}\n"
      "  return (%1)\n";
  // The list [0.5,1,-inf] is all doubles, so its 1 prints back as 1.0.
  std::string expected = text;
  expected.replace(expected.find("[0.5,1,-inf]"), 12, "[0.5,1.0,-inf]");
  EXPECT_EQ(reprint(text), expected);
  EXPECT_EQ(reprint(expected), expected);
}

TEST(RoundTripTest, MultiOutputNodes) {
  const std::string text =
      "graph(%x : f32[2,4]):\n"
      "  %values : f32[2], %indices : i64[2] = aten::max.dim(%x) {dim=1, keepdim=false}\n"
      "  %3 : f32[2], %4 : i64[2] = aten::min.dim(%x) {dim=1, keepdim=false}\n"
      "  return (%indices, %3, %4, %values)\n";
  EXPECT_EQ(reprint(text), text);
}

TEST(RoundTripTest, NodeWithoutOutputs) {
  const std::string text = "graph(%x : f32[2]):\n  test::sink(%x) {tag=\"a\"}\n  return (%x)\n";
  EXPECT_EQ(reprint(text), text);
}

TEST(RoundTripTest, GraphWithoutInputsOrOutputs) {
  EXPECT_EQ(reprint("graph():\n  return ()\n"), "graph():\n  return ()\n");
}

TEST(RoundTripTest, DoublesKeepTheirExactValue) {
  for (double v : {1e-05, 0.1, 1.0 / 3.0, -2.5e300, 5e-324}) {
    Attr attr = only_attr("v=" + attr_string(v));
    ASSERT_TRUE(std::holds_alternative<double>(attr)) << v;
    EXPECT_EQ(std::get<double>(attr), v);
  }
}

// ---- What the parser builds ------------------------------------------------------------------

TEST(ParserTest, KeepsIdentifierNamesButNotNumbers) {
  auto g = parse_graph("graph(%x : f32[2], %5 : f32[2]):\n  return (%x, %5)\n");
  EXPECT_EQ(g->inputs().at(0)->name(), "x");
  EXPECT_EQ(g->inputs().at(1)->name(), "");
}

TEST(ParserTest, ReadsTypesWithStridesAndDevice) {
  auto g = parse_graph("graph(%x : f16[3,2]{1,3}@cuda:2):\n  return (%x)\n");
  TensorType want;
  want.dtype = DType::Float16;
  want.sizes = {3, 2};
  want.strides = {1, 3};
  want.device = Device{DeviceKind::CUDA, 2};
  EXPECT_EQ(g->inputs().at(0)->type(), want);
}

TEST(ParserTest, TypeWithoutStridesIsContiguous) {
  auto g = parse_graph("graph(%x : f32[2,3,4]):\n  return (%x)\n");
  EXPECT_EQ(g->inputs().at(0)->type().strides, (std::vector<int64_t>{12, 4, 1}));
}

TEST(ParserTest, ConnectsNodesToTheirInputs) {
  auto g = parse_graph(
      "graph(%x : f32[2]):\n"
      "  %a : f32[2] = aten::exp(%x)\n"
      "  %b : f32[2] = aten::add.Tensor(%a, %x) {alpha=1}\n"
      "  return (%b)\n");
  auto nodes = g->nodes();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[1]->op(), "aten::add.Tensor");
  EXPECT_EQ(nodes[1]->input(0), nodes[0]->output());
  EXPECT_EQ(nodes[1]->input(1), g->inputs()[0]);
  EXPECT_EQ(g->outputs().at(0), nodes[1]->output());
  EXPECT_EQ(nodes[1]->output()->producer(), nodes[1]);
}

TEST(ParserTest, IgnoresCommentsAndBlankLines) {
  auto g = parse_graph(
      "# a comment before the graph\n"
      "\n"
      "graph(%x : f32[2]):  # trailing comment\n"
      "\n"
      "  # a comment line\n"
      "  %1 : f32[2] = aten::relu(%x)\n"
      "  return (%1)\n"
      "# done\n");
  EXPECT_EQ(g->num_nodes(), 1u);
}

TEST(ParserTest, IntegerAttributeIsInt64) {
  Attr a = only_attr("a=-7");
  ASSERT_TRUE(std::holds_alternative<int64_t>(a));
  EXPECT_EQ(std::get<int64_t>(a), -7);
}

TEST(ParserTest, ExponentOrPointMakesADouble) {
  EXPECT_TRUE(std::holds_alternative<double>(only_attr("a=1e5")));
  EXPECT_TRUE(std::holds_alternative<double>(only_attr("a=2E-3")));
  EXPECT_TRUE(std::holds_alternative<double>(only_attr("a=2.0")));
}

TEST(ParserTest, InfAndNanAreDoubles) {
  Attr inf = only_attr("a=-inf");
  ASSERT_TRUE(std::holds_alternative<double>(inf));
  EXPECT_TRUE(std::isinf(std::get<double>(inf)) && std::get<double>(inf) < 0);
  Attr nan = only_attr("a=nan");
  ASSERT_TRUE(std::holds_alternative<double>(nan));
  EXPECT_TRUE(std::isnan(std::get<double>(nan)));
}

TEST(ParserTest, StringEscapesAreDecoded) {
  Attr a = only_attr(R"(a="q\"b\\s#x")");
  ASSERT_TRUE(std::holds_alternative<std::string>(a));
  EXPECT_EQ(std::get<std::string>(a), "q\"b\\s#x");
}

TEST(ParserTest, EmptyListIsAnIntList) {
  Attr a = only_attr("a=[]");
  ASSERT_TRUE(std::holds_alternative<std::vector<int64_t>>(a));
  EXPECT_TRUE(std::get<std::vector<int64_t>>(a).empty());
}

TEST(ParserTest, OneDoubleMakesTheWholeListDoubles) {
  Attr a = only_attr("a=[1, 2.5, -3]");
  ASSERT_TRUE(std::holds_alternative<std::vector<double>>(a));
  EXPECT_EQ(std::get<std::vector<double>>(a), (std::vector<double>{1.0, 2.5, -3.0}));
}

TEST(ParserTest, BoolList) {
  Attr a = only_attr("a=[true, false, true]");
  ASSERT_TRUE(std::holds_alternative<std::vector<bool>>(a));
  EXPECT_EQ(std::get<std::vector<bool>>(a), (std::vector<bool>{true, false, true}));
}

TEST(ParserTest, EmptyAttributeBracesAreAllowed) {
  auto g = parse_graph("graph(%x : f32[2]):\n  %1 : f32[2] = aten::relu(%x) {}\n  return (%1)\n");
  EXPECT_TRUE(g->nodes().at(0)->attrs().empty());
}

// ---- Parse errors ----------------------------------------------------------------------------

TEST(ParseErrorTest, UndefinedValueIsNamed) {
  EXPECT_EQ(parse_error("graph(%x : f32[2]):\n  %1 : f32[2] = aten::relu(%foo)\n  return (%1)\n"),
            "line 2, column 28: use of undefined value '%foo'");
}

TEST(ParseErrorTest, NodeCannotReadItsOwnOutput) {
  EXPECT_EQ(parse_error("graph():\n  %1 : f32[2] = aten::relu(%1)\n  return (%1)\n"),
            "line 2, column 28: use of undefined value '%1'");
}

TEST(ParseErrorTest, UndefinedGraphOutput) {
  EXPECT_EQ(parse_error("graph(%x : f32[2]):\n  return (%y)\n"),
            "line 2, column 11: use of undefined value '%y'");
}

TEST(ParseErrorTest, RedefinitionNamesTheFirstDefinition) {
  EXPECT_EQ(parse_error("graph(%x : f32[2]):\n  %x : f32[2] = aten::relu(%x)\n  return (%x)\n"),
            "line 2, column 3: redefinition of value '%x' (first defined on line 1)");
}

TEST(ParseErrorTest, DuplicateGraphInput) {
  EXPECT_EQ(parse_error("graph(%0 : f32[2], %0 : f32[2]):\n  return (%0)\n"),
            "line 1, column 20: redefinition of value '%0' (first defined on line 1)");
}

TEST(ParseErrorTest, SameOutputTwiceInOneNode) {
  EXPECT_EQ(parse_error(
                "graph(%x : f32[2]):\n  %a : f32[2], %a : f32[2] = aten::foo(%x)\n  return (%a)\n"),
            "line 2, column 16: value '%a' appears twice among the node's outputs");
}

TEST(ParseErrorTest, UnknownDtypeListsTheValidOnes) {
  EXPECT_EQ(parse_error("graph(%x : f33[2]):\n  return (%x)\n"),
            "line 1, column 12: unknown dtype 'f33' (valid dtypes: b8, u8, i8, i16, i32, i64, f16, "
            "bf16, f32, f64, c64, c128)");
}

TEST(ParseErrorTest, BadDevice) {
  EXPECT_EQ(parse_error("graph(%x : f32[2]@gpu):\n  return (%x)\n"),
            "line 1, column 18: unknown device 'gpu' (valid devices: cpu, cuda, cuda:N, meta)");
  EXPECT_EQ(parse_error("graph(%x : f32[2]@cuda:x):\n  return (%x)\n"),
            "line 1, column 18: unknown device 'cuda:x' (valid devices: cpu, cuda, cuda:N, meta)");
}

TEST(ParseErrorTest, MissingColonAfterInputName) {
  EXPECT_EQ(parse_error("graph(%x f32[2]):\n  return (%x)\n"),
            "line 1, column 10: expected ':' after '%x', found 'f32'");
}

TEST(ParseErrorTest, NonIntegerSize) {
  EXPECT_EQ(parse_error("graph(%x : f32[2.5]):\n  return (%x)\n"),
            "line 1, column 16: expected a size (an integer), found '2.5'");
}

TEST(ParseErrorTest, MissingReturn) {
  EXPECT_EQ(parse_error("graph(%x : f32[2]):\n  %1 : f32[2] = aten::relu(%x)\n"),
            "line 3, column 1: expected a node '%name : type = ns::op(...)' or 'return (...)', "
            "found end of input");
}

TEST(ParseErrorTest, TextAfterReturn) {
  EXPECT_EQ(parse_error("graph(%x : f32[2]):\n  return (%x)\n  return (%x)\n"),
            "line 3, column 3: expected end of input after the return statement, found 'return'");
}

TEST(ParseErrorTest, UnqualifiedOperatorName) {
  EXPECT_EQ(parse_error("graph(%x : f32[2]):\n  %1 : f32[2] = relu(%x)\n  return (%1)\n"),
            "line 2, column 21: expected '::' in the operator name 'relu', found '('");
}

TEST(ParseErrorTest, MissingOverloadName) {
  EXPECT_EQ(parse_error("graph(%x : f32[2]):\n  %1 : f32[2] = aten::add.(%x)\n  return (%1)\n"),
            "line 2, column 27: expected an overload name after 'aten::add.', found '('");
}

TEST(ParseErrorTest, InvalidValueName) {
  EXPECT_EQ(parse_error("graph(%1x : f32[2]):\n  return (%1x)\n"),
            "line 1, column 7: invalid value name '%1x' (expected an identifier or a number)");
}

TEST(ParseErrorTest, UnexpectedCharacter) {
  EXPECT_EQ(parse_error("graph(%x : f32[2]) ;\n"), "line 1, column 20: unexpected character ';'");
}

TEST(ParseErrorTest, UnterminatedString) {
  EXPECT_EQ(parse_error("graph(%x : f32[2]):\n  test::sink(%x) {s=\"abc}\n  return (%x)\n"),
            "line 2, column 21: unterminated string");
}

TEST(ParseErrorTest, UnknownEscape) {
  EXPECT_EQ(parse_error("graph(%x : f32[2]):\n  test::sink(%x) {s=\"a\\nb\"}\n  return (%x)\n"),
            "line 2, column 23: unknown escape in string (only \\\" and \\\\ are allowed)");
}

TEST(ParseErrorTest, IntegerOutOfRange) {
  EXPECT_EQ(
      parse_error("graph(%x : f32[2]):\n  test::sink(%x) {n=9223372036854775808}\n  return (%x)\n"),
      "line 2, column 21: number '9223372036854775808' is out of range for int64");
}

TEST(ParseErrorTest, MalformedNumber) {
  EXPECT_EQ(parse_error("graph(%x : f32[2]):\n  test::sink(%x) {n=12ab}\n  return (%x)\n"),
            "line 2, column 21: malformed number '12ab'");
  EXPECT_EQ(parse_error("graph(%x : f32[2]):\n  test::sink(%x) {n=1e}\n  return (%x)\n"),
            "line 2, column 21: malformed number: missing exponent digits");
}

TEST(ParseErrorTest, BadAttributeValue) {
  EXPECT_EQ(parse_error("graph(%x : f32[2]):\n  test::sink(%x) {n=maybe}\n  return (%x)\n"),
            "line 2, column 21: expected an attribute value (None, true, false, a number, a string "
            "or a list), found 'maybe'");
}

TEST(ParseErrorTest, DuplicateAttribute) {
  EXPECT_EQ(parse_error("graph(%x : f32[2]):\n  test::sink(%x) {n=1, n=2}\n  return (%x)\n"),
            "line 2, column 24: attribute 'n' is given twice");
}

TEST(ParseErrorTest, ListMixingBoolsAndNumbers) {
  EXPECT_EQ(parse_error("graph(%x : f32[2]):\n  test::sink(%x) {n=[1, true]}\n  return (%x)\n"),
            "line 2, column 25: list mixes booleans and numbers at 'true'");
}

TEST(ParseErrorTest, StringInList) {
  EXPECT_EQ(parse_error("graph(%x : f32[2]):\n  test::sink(%x) {n=[\"a\"]}\n  return (%x)\n"),
            "line 2, column 22: expected a list element (an integer, a float, true or false), "
            "found '\"a\"'");
}

TEST(ParseErrorTest, UnclosedInputList) {
  EXPECT_EQ(parse_error("graph(%x : f32[2]):\n  %1 : f32[2] = aten::relu(%x\n  return (%1)\n"),
            "line 3, column 3: expected ')' after the inputs of aten::relu, found 'return'");
}

TEST(ParseErrorTest, MissingGraphKeyword) {
  EXPECT_EQ(parse_error("grph():\n  return ()\n"),
            "line 1, column 1: expected 'graph' at the start of the text, found 'grph'");
}

}  // namespace
}  // namespace kiln::ir
