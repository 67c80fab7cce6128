// Node attributes: the non-tensor arguments of an operator, by schema argument name.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace kiln::ir {

struct NoneAttr {
  bool operator==(const NoneAttr&) const = default;
};

/// One attribute value. Which C++ alternative holds a value is what the printer and parser keep;
/// the operator's schema says how the runtime reads it (a Scalar from int64_t or double, a
/// ScalarType from int64_t, a Device from a string such as "cpu").
using Attr = std::variant<NoneAttr, int64_t, double, bool, std::string, std::vector<int64_t>,
                          std::vector<double>, std::vector<bool>>;

/// Printed form: None, 3, 2.5, true, "str", [1,2], [0.5,1.0], [true,false].
std::string attr_string(const Attr& attr);

/// Attributes in the order of the schema's arguments.
using AttrList = std::vector<std::pair<std::string, Attr>>;

/// Marks a node whose output shapes the importer found by running the op on sample inputs (it has
/// no meta kernel): the runtime checks on every call that the op still gives those shapes.
inline constexpr const char* kSampledShapeAttr = "kiln_sampled_shape";

}  // namespace kiln::ir
