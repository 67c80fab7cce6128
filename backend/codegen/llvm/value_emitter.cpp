#include "backend/codegen/llvm/value_emitter.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>

#include <stdexcept>

#include "backend/codegen/llvm/math.h"
#include "kiln/error.h"
#include "passes/kernel/scalar_convert.h"

namespace kiln::codegen {

using kernel::DType;
using kernel::Op;

namespace {

bool is_float(DType t) {
  return ir::is_floating(t);
}
bool is_unsigned(DType t) {
  return t == DType::UInt8 || t == DType::Bool;
}

bool shares_memory(const kernel::Kernel& kernel, int a, int b) {
  for (const auto& [in, out] : kernel.in_place)
    if ((in == a && out == b) || (in == b && out == a)) return true;
  return false;
}

[[noreturn]] void unsupported(const std::string& what) {
  throw Error(ErrorKind::Unsupported, "LLVM codegen: " + what);
}

}  // namespace

ValueEmitter::ValueEmitter(llvm::IRBuilder<>& builder, const kernel::Kernel& kernel,
                           std::vector<llvm::Value*> buffer_pointers, MathTarget math,
                           SizeValues* sizes)
    : b_(builder),
      kernel_(kernel),
      buffers_(std::move(buffer_pointers)),
      element_(kernel::element_levels(kernel)),
      math_(math),
      sizes_(sizes) {
  // Buffers never overlap an output (the memory plan and fresh outputs see to it) except the
  // pairs the plan writes in place, so each buffer is its own alias scope, not disjoint from its
  // in-place partner: LLVM may keep inputs in registers across stores.
  llvm::MDBuilder md(b_.getContext());
  llvm::MDNode* domain = md.createAnonymousAliasScopeDomain("kiln.buffers");
  std::vector<llvm::Metadata*> scopes;
  for (size_t i = 0; i < buffers_.size(); ++i)
    scopes.push_back(md.createAnonymousAliasScope(domain));
  for (size_t i = 0; i < buffers_.size(); ++i) {
    std::vector<llvm::Metadata*> others;
    for (size_t j = 0; j < buffers_.size(); ++j)
      if (j != i && !shares_memory(kernel, static_cast<int>(i), static_cast<int>(j)))
        others.push_back(scopes[j]);
    scope_.push_back(llvm::MDNode::get(b_.getContext(), {scopes[i]}));
    noalias_.push_back(llvm::MDNode::get(b_.getContext(), others));
  }
}

llvm::Instruction* ValueEmitter::tag(llvm::Instruction* access, int buffer) {
  access->setMetadata(llvm::LLVMContext::MD_alias_scope, scope_[buffer]);
  access->setMetadata(llvm::LLVMContext::MD_noalias, noalias_[buffer]);
  return access;
}

const kernel::IndexMap& ValueEmitter::map(int id) const {
  const int num_exprs = static_cast<int>(kernel_.exprs.size());
  return id < num_exprs ? kernel_.exprs.at(id).map : kernel_.stores.at(id - num_exprs).map;
}

llvm::Type* ValueEmitter::register_type(DType dtype, int width) const {
  llvm::LLVMContext& c = b_.getContext();
  llvm::Type* t = nullptr;
  switch (dtype) {
    case DType::Bool:
      t = llvm::Type::getInt1Ty(c);
      break;
    case DType::UInt8:
    case DType::Int8:
      t = llvm::Type::getInt8Ty(c);
      break;
    case DType::Int16:
      t = llvm::Type::getInt16Ty(c);
      break;
    case DType::Int32:
      t = llvm::Type::getInt32Ty(c);
      break;
    case DType::Int64:
      t = llvm::Type::getInt64Ty(c);
      break;
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float32:
      t = llvm::Type::getFloatTy(c);
      break;
    case DType::Float64:
      t = llvm::Type::getDoubleTy(c);
      break;
    default:
      unsupported(std::string("dtype ") + ir::dtype_name(dtype));
  }
  return width == 1 ? t : llvm::FixedVectorType::get(t, width);
}

llvm::Value* ValueEmitter::splat(llvm::Value* scalar, int width) {
  return width == 1 ? scalar : b_.CreateVectorSplat(width, scalar);
}

llvm::Value* ValueEmitter::constant(double value, DType dtype, int width) {
  llvm::Type* t = register_type(dtype, 1);
  llvm::Value* c;
  if (is_float(dtype)) {
    c = llvm::ConstantFP::get(t, value);
    // A float16/bfloat16 constant is the float nearest in that format.
    if (dtype == DType::Float16 || dtype == DType::BFloat16) c = convert(c, DType::Float32, dtype);
  } else if (dtype == DType::Bool) {
    c = b_.getInt1(value != 0);
  } else {
    c = llvm::ConstantInt::get(
        t, static_cast<uint64_t>(kernel::integer_from_float(value, DType::Float64, dtype)), true);
  }
  return splat(c, width);
}

llvm::Value* ValueEmitter::constant_of(const kernel::Expr& e, int width) {
  if (!e.constant_term) return constant(e.constant, e.dtype, width);
  // A size as a value: the term at this call, converted as an int64 is to the dtype.
  llvm::Value* v = sizes_->term(*e.constant_term);
  return splat(convert(v, DType::Int64, e.dtype), width);
}

llvm::Value* ValueEmitter::round_to_bfloat16(llvm::Value* v) {
  // Round to nearest even on the bits, keep NaN a NaN, and widen back to float.
  llvm::Type* i32 = b_.getInt32Ty();
  if (auto* vector = llvm::dyn_cast<llvm::VectorType>(v->getType()))
    i32 = llvm::VectorType::get(i32, vector);
  auto k = [&](uint32_t x) { return llvm::ConstantInt::get(i32, x); };
  llvm::Value* bits = b_.CreateBitCast(v, i32);
  llvm::Value* lsb = b_.CreateAnd(b_.CreateLShr(bits, k(16)), k(1));
  llvm::Value* rounded = b_.CreateAdd(bits, b_.CreateAdd(lsb, k(0x7fff)));
  llvm::Value* nan = b_.CreateOr(bits, k(0x400000));
  llvm::Value* chosen = b_.CreateSelect(b_.CreateFCmpUNO(v, v), nan, rounded);
  return b_.CreateBitCast(b_.CreateAnd(chosen, k(0xffff0000u)), v->getType());
}

llvm::Value* ValueEmitter::convert(llvm::Value* v, DType from, DType to) {
  if (from == to) return v;
  const int width =
      v->getType()->isVectorTy()
          ? static_cast<int>(llvm::cast<llvm::FixedVectorType>(v->getType())->getNumElements())
          : 1;
  llvm::Type* target = register_type(to, width);
  if (to == DType::Bool) {
    if (is_float(from)) return b_.CreateFCmpUNE(v, llvm::Constant::getNullValue(v->getType()));
    return b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
  }
  if (is_float(from) && is_float(to)) {
    if (to == DType::Float64) return b_.CreateFPExt(v, target);  // from any float held as float
    llvm::Value* f =
        from == DType::Float64 ? b_.CreateFPTrunc(v, register_type(DType::Float32, width)) : v;
    if (to == DType::Float16) {
      llvm::Type* half = b_.getHalfTy();
      if (width > 1) half = llvm::FixedVectorType::get(half, width);
      // From double through float, as the interpreter and c10::Half(float) do.
      llvm::Value* h = b_.CreateFPTrunc(f, half);
      return b_.CreateFPExt(h, target);
    }
    if (to == DType::BFloat16) return round_to_bfloat16(f);
    return f;  // float16/bfloat16 -> float32: already exact
  }
  if (is_float(from)) return float_to_integer(v, from, to, width);
  if (is_float(to)) {
    llvm::Value* f = is_unsigned(from) ? b_.CreateUIToFP(v, target) : b_.CreateSIToFP(v, target);
    if (to == DType::Float16 || to == DType::BFloat16) return convert(f, DType::Float32, to);
    return f;
  }
  return b_.CreateIntCast(v, target, !is_unsigned(from));
}

llvm::Value* ValueEmitter::float_to_integer(llvm::Value* v, DType from, DType to, int width) {
  // fptosi is poison for NaN, infinities and values out of range; kiln defines them as eager's
  // x86 result (kernel::integer_from_float): the intermediate integer's most negative value, then
  // wrapped to `to` (so a negative float wraps into uint8 as in torch).
  const bool wide = kernel::converts_through_int64(from, to);
  llvm::Type* via = register_type(wide ? DType::Int64 : DType::Int32, width);
  const double limit = wide ? 0x1p63 : 0x1p31;
  llvm::Value* in_range =
      b_.CreateAnd(b_.CreateFCmpOGE(v, llvm::ConstantFP::get(v->getType(), -limit)),
                   b_.CreateFCmpOLT(v, llvm::ConstantFP::get(v->getType(), limit)));
  llvm::Value* safe = b_.CreateSelect(in_range, v, llvm::ConstantFP::get(v->getType(), 0.0));
  const uint64_t indefinite = wide ? uint64_t{1} << 63 : uint64_t{1} << 31;
  llvm::Value* converted = b_.CreateSelect(in_range, b_.CreateFPToSI(safe, via),
                                           llvm::ConstantInt::get(via, indefinite));
  llvm::Type* target = register_type(to, width);
  return via == target ? converted : b_.CreateTrunc(converted, target);
}

llvm::Value* ValueEmitter::address(int map_id, const Position& at, llvm::Value* lane_index) {
  const kernel::IndexMap& m = map(map_id);
  const int64_t inner_stride = stride_at(m, at);
  llvm::Value* offset = (*at.offsets)[map_id];
  if (inner_stride != 0) {
    llvm::Value* i = lane_index ? lane_index : at.index;
    const int dim = at.dim < 0 ? kernel_.rank() - 1 : at.dim;
    offset = b_.CreateAdd(offset, b_.CreateMul(i, sizes_->stride(m, dim)));
  }
  const DType t = kernel_.buffers[m.buffer].dtype;
  llvm::Type* memory = b_.getIntNTy(static_cast<unsigned>(ir::dtype_size(t) * 8));
  return b_.CreateGEP(memory, buffers_[m.buffer], offset);
}

void ValueEmitter::prefetch(int map_id, const Position& at) {
  llvm::Value* at_address = address(map_id, at, nullptr);
  // read, keep in all cache levels (locality 3), data cache
  b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {at_address->getType()},
                     {at_address, b_.getInt32(0), b_.getInt32(3), b_.getInt32(1)});
}

llvm::Value* ValueEmitter::load(const kernel::IndexMap& m, int map_id, const Position& at) {
  const DType t = kernel_.buffers[m.buffer].dtype;
  const int width = at.width;
  const int64_t inner_stride = stride_at(m, at);
  llvm::Type* memory = nullptr;
  switch (t) {
    case DType::Float32:
      memory = b_.getFloatTy();
      break;
    case DType::Float64:
      memory = b_.getDoubleTy();
      break;
    case DType::Float16:
      memory = b_.getHalfTy();
      break;
    default:
      memory = b_.getIntNTy(static_cast<unsigned>(ir::dtype_size(t) * 8));
      break;
  }
  const llvm::Align align(ir::dtype_size(t));
  llvm::Value* raw;
  if (width == 1 || inner_stride == 0) {
    raw = tag(b_.CreateAlignedLoad(memory, address(map_id, at, nullptr), align), m.buffer);
    if (width > 1) raw = b_.CreateVectorSplat(width, raw);
  } else if (inner_stride == 1) {
    raw = tag(b_.CreateAlignedLoad(llvm::FixedVectorType::get(memory, width),
                                   address(map_id, at, nullptr), align),
              m.buffer);
  } else {
    raw = llvm::PoisonValue::get(llvm::FixedVectorType::get(memory, width));
    for (int lane = 0; lane < width; ++lane) {
      llvm::Value* i = b_.CreateAdd(at.index, b_.getInt64(lane));
      raw = b_.CreateInsertElement(
          raw, tag(b_.CreateAlignedLoad(memory, address(map_id, at, i), align), m.buffer), lane);
    }
  }
  // Memory format -> register format.
  llvm::Type* reg = register_type(t, width);
  switch (t) {
    case DType::Bool:
      return b_.CreateICmpNE(raw, llvm::Constant::getNullValue(raw->getType()));
    case DType::Float16:
      return b_.CreateFPExt(raw, reg);
    case DType::BFloat16: {
      llvm::Type* i32 = register_type(DType::Int32, width);
      return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(raw, i32), 16), reg);
    }
    default:
      return raw;
  }
}

void ValueEmitter::store(int store_index, const Position& at) {
  const kernel::Store& s = kernel_.stores.at(store_index);
  const DType t = kernel_.buffers[s.map.buffer].dtype;
  const DType from = kernel_.exprs[s.value].dtype;
  const int map_id = store_map_id(store_index);
  llvm::Value* v = convert(value(s.value, at), from, t);
  // Register format -> memory format.
  switch (t) {
    case DType::Bool:
      v = b_.CreateZExt(v, register_type(DType::UInt8, at.width));
      break;
    case DType::Float16: {
      llvm::Type* half =
          at.width == 1 ? b_.getHalfTy() : llvm::FixedVectorType::get(b_.getHalfTy(), at.width);
      v = b_.CreateFPTrunc(v, half);
      break;
    }
    case DType::BFloat16:
      v = b_.CreateTrunc(
          b_.CreateLShr(b_.CreateBitCast(v, register_type(DType::Int32, at.width)), 16),
          register_type(DType::Int16, at.width));
      break;
    default:
      break;
  }
  const llvm::Align align(ir::dtype_size(t));
  const int64_t inner_stride = stride_at(s.map, at);
  if (streaming_ && at.width > 1 && inner_stride == 1) {
    const uint64_t bytes = std::min<uint64_t>(64, at.width * ir::dtype_size(t));
    llvm::StoreInst* store =
        b_.CreateAlignedStore(v, address(map_id, at, nullptr), llvm::Align(bytes));
    store->setMetadata(
        llvm::LLVMContext::MD_nontemporal,
        llvm::MDNode::get(b_.getContext(), llvm::ConstantAsMetadata::get(b_.getInt32(1))));
    tag(store, s.map.buffer);
  } else if (at.width == 1 || inner_stride == 1) {
    tag(b_.CreateAlignedStore(v, address(map_id, at, nullptr), align), s.map.buffer);
  } else {
    for (int lane = 0; lane < at.width; ++lane) {
      llvm::Value* i = b_.CreateAdd(at.index, b_.getInt64(lane));
      tag(b_.CreateAlignedStore(b_.CreateExtractElement(v, lane), address(map_id, at, i), align),
          s.map.buffer);
    }
  }
}

llvm::Value* ValueEmitter::value(int id, const Position& at) {
  const kernel::Expr& e = kernel_.exprs.at(id);
  if (!element_[id]) {
    if (auto found = row_values_.find(id); found != row_values_.end())
      return found->second->getType()->isVectorTy() ? found->second
                                                    : splat(found->second, at.width);
    if (e.op == Op::Constant) return constant_of(e, at.width);
    // An expr of constants only, which no row computed (an elementwise kernel has no rows):
    // computed here from its operands (IRBuilder folds it to a constant).
    if (e.op == Op::Load || e.op == Op::Reduce)
      throw Error(ErrorKind::Internal,
                  "LLVM codegen: row value %" + std::to_string(id) + " not ready");
  }
  if (auto found = element_cache_.find(id); found != element_cache_.end()) return found->second;
  auto cached = row_cache_.find(id);
  const RowCacheMode mode = cached == row_cache_.end() ? RowCacheMode::None : cached->second.mode;
  llvm::Value* slot = nullptr;
  if (mode != RowCacheMode::None) {
    llvm::Type* scalar = register_type(e.dtype, 1);
    slot = b_.CreateGEP(scalar, cached->second.scratch, at.index);
    if (mode == RowCacheMode::Load) {
      llvm::Value* loaded = b_.CreateAlignedLoad(register_type(e.dtype, at.width), slot,
                                                 llvm::Align(scalar->getScalarSizeInBits() / 8));
      return element_cache_[id] = loaded;
    }
  }
  llvm::Value* result;
  if (e.op == Op::Load) {
    result = load(e.map, load_map_id(id), at);
  } else {
    std::vector<llvm::Value*> args;
    for (int a : e.args)
      args.push_back(value(a, at));
    result = compute(e, args, at.width, at);
  }
  if (mode == RowCacheMode::Store) {
    b_.CreateAlignedStore(result, slot, llvm::Align(result->getType()->getScalarSizeInBits() / 8));
  }
  element_cache_[id] = result;
  return result;
}

llvm::Value* ValueEmitter::row_expr(int id, const Position& row) {
  const kernel::Expr& e = kernel_.exprs.at(id);
  if (e.op == Op::Load) return load(e.map, load_map_id(id), row);
  if (e.op == Op::Constant) return constant_of(e, row.width);
  std::vector<llvm::Value*> args;
  for (int a : e.args)
    args.push_back(row_values_.at(a));
  return compute(e, args, row.width, row);
}

llvm::Value* ValueEmitter::compute(const kernel::Expr& e, const std::vector<llvm::Value*>& args,
                                   int width, const Position& at) {
  switch (e.op) {
    case Op::Constant:
      return constant_of(e, width);
    case Op::Cast:
      return convert(args[0], kernel_.exprs[e.args[0]].dtype, e.dtype);
    case Op::Where:
      return b_.CreateSelect(args[0], args[1], args[2]);
    case Op::Load:
    case Op::Reduce:
      throw Error(ErrorKind::Internal, "LLVM codegen: unexpected load or reduce");
    default:
      break;
  }
  if (kernel::op_arity(e.op) == 1) return unary(e, args[0]);
  return binary(e, args[0], args[1], kernel_.exprs[e.args[0]].dtype);
}

llvm::Value* ValueEmitter::libm_per_lane(const char* name, llvm::Value* x) {
  llvm::Module* module = b_.GetInsertBlock()->getModule();
  llvm::Type* d = b_.getDoubleTy();
  llvm::FunctionCallee fn = module->getOrInsertFunction(name, d, d);
  if (!x->getType()->isVectorTy()) return b_.CreateCall(fn, {x});
  const int width =
      static_cast<int>(llvm::cast<llvm::FixedVectorType>(x->getType())->getNumElements());
  llvm::Value* out = llvm::PoisonValue::get(x->getType());
  for (int lane = 0; lane < width; ++lane)
    out = b_.CreateInsertElement(out, b_.CreateCall(fn, {b_.CreateExtractElement(x, lane)}), lane);
  return out;
}

bool ValueEmitter::is_shifted_by_row_max(int id) const {
  // x <= max(x) for every element, so x - max(x) rounds to <= 0; a NaN anywhere makes the max
  // NaN (reduce() tracks it) and the difference NaN.
  const kernel::Expr& sub = kernel_.exprs[id];
  if (sub.op != Op::Sub) return false;
  const kernel::Expr& max = kernel_.exprs[sub.args[1]];
  return max.op == Op::Reduce && max.reduce == kernel::ReduceKind::Max &&
         max.args[0] == sub.args[0] && max.dtype == sub.dtype;
}

llvm::Value* ValueEmitter::unary(const kernel::Expr& e, llvm::Value* x) {
  const DType t = e.dtype;
  llvm::Type* type = x->getType();
  auto one = [&] { return llvm::ConstantFP::get(type, 1.0); };
  auto round = [&](llvm::Value* v) {
    return t == DType::Float16 || t == DType::BFloat16 ? convert(v, DType::Float32, t) : v;
  };
  const bool f64 = t == DType::Float64;
  if (is_float(t)) {
    switch (e.op) {
      case Op::Neg:
        return b_.CreateFNeg(x);
      case Op::Abs:
        return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
      case Op::Floor:
        return b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, x);
      case Op::Trunc:
        return b_.CreateUnaryIntrinsic(llvm::Intrinsic::trunc, x);
      case Op::Sqrt:
        return round(b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x));
      case Op::Rsqrt:
        return round(b_.CreateFDiv(one(), b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x)));
      case Op::Reciprocal:
        return round(b_.CreateFDiv(one(), x));
      case Op::Exp:
        if (f64) return round(libm_per_lane("exp", x));
        return round(emit_exp(
            b_, x, math_,
            is_shifted_by_row_max(e.args[0]) ? ExpArgument::kNonPositive : ExpArgument::kAny));
      case Op::Log:
        return round(f64 ? libm_per_lane("log", x) : emit_log(b_, x));
      case Op::Tanh:
        return round(f64 ? libm_per_lane("tanh", x) : emit_tanh(b_, x, math_));
      case Op::Erf:
        return round(f64 ? libm_per_lane("erf", x) : emit_erf(b_, x, math_));
      case Op::Sigmoid:
        if (!f64) return round(emit_sigmoid(b_, x, math_));
        return b_.CreateFDiv(one(), b_.CreateFAdd(one(), libm_per_lane("exp", b_.CreateFNeg(x))));
      default:
        break;
    }
  } else {
    switch (e.op) {
      case Op::Neg:
        return b_.CreateNeg(x);
      case Op::Abs:
        return is_unsigned(t) ? x
                              : b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, x, b_.getFalse());
      case Op::Not:
        return b_.CreateNot(x);
      case Op::Floor:
      case Op::Trunc:
        return x;
      default:
        break;
    }
  }
  unsupported(std::string(kernel::op_name(e.op)) + " on " + ir::dtype_name(t));
}

llvm::Value* ValueEmitter::nan_propagating(llvm::Value* a, llvm::Value* b, bool max) {
  // llvm.maximum also orders -0 below +0, which costs a long sequence on x86; torch.maximum
  // only needs NaN to win, so: maxnum, and NaN (a + b) where either is NaN. Not a
  // compare-and-select: LLVM 19's InstCombine folds that form wrongly when an operand is
  // fabs(x) (max(|x|, 0) became 0 for negative x).
  llvm::Value* chosen =
      b_.CreateBinaryIntrinsic(max ? llvm::Intrinsic::maxnum : llvm::Intrinsic::minnum, a, b);
  return b_.CreateSelect(b_.CreateFCmpUNO(a, b), b_.CreateFAdd(a, b), chosen);
}

llvm::Value* ValueEmitter::binary(const kernel::Expr& e, llvm::Value* a, llvm::Value* b,
                                  DType arg) {
  const DType t = e.dtype;
  auto round = [&](llvm::Value* v) {
    return t == DType::Float16 || t == DType::BFloat16 ? convert(v, DType::Float32, t) : v;
  };
  if (kernel::is_comparison(e.op)) {
    if (is_float(arg)) {
      switch (e.op) {
        case Op::Eq:
          return b_.CreateFCmpOEQ(a, b);
        case Op::Ne:
          return b_.CreateFCmpUNE(a, b);
        case Op::Lt:
          return b_.CreateFCmpOLT(a, b);
        case Op::Le:
          return b_.CreateFCmpOLE(a, b);
        case Op::Gt:
          return b_.CreateFCmpOGT(a, b);
        default:
          return b_.CreateFCmpOGE(a, b);
      }
    }
    const bool u = is_unsigned(arg);
    switch (e.op) {
      case Op::Eq:
        return b_.CreateICmpEQ(a, b);
      case Op::Ne:
        return b_.CreateICmpNE(a, b);
      case Op::Lt:
        return u ? b_.CreateICmpULT(a, b) : b_.CreateICmpSLT(a, b);
      case Op::Le:
        return u ? b_.CreateICmpULE(a, b) : b_.CreateICmpSLE(a, b);
      case Op::Gt:
        return u ? b_.CreateICmpUGT(a, b) : b_.CreateICmpSGT(a, b);
      default:
        return u ? b_.CreateICmpUGE(a, b) : b_.CreateICmpSGE(a, b);
    }
  }
  if (is_float(t)) {
    switch (e.op) {
      case Op::Add:
        return round(b_.CreateFAdd(a, b));
      case Op::Sub:
        return round(b_.CreateFSub(a, b));
      case Op::Mul:
        return round(b_.CreateFMul(a, b));
      case Op::Div:
        return round(b_.CreateFDiv(a, b));
      case Op::Max:
        return nan_propagating(a, b, true);
      case Op::Min:
        return nan_propagating(a, b, false);
      default:
        break;
    }
  } else {
    const bool u = is_unsigned(t);
    switch (e.op) {
      case Op::Add:
        return b_.CreateAdd(a, b);
      case Op::Sub:
        return b_.CreateSub(a, b);
      case Op::Mul:
        return b_.CreateMul(a, b);
      case Op::Max:
        return b_.CreateBinaryIntrinsic(u ? llvm::Intrinsic::umax : llvm::Intrinsic::smax, a, b);
      case Op::Min:
        return b_.CreateBinaryIntrinsic(u ? llvm::Intrinsic::umin : llvm::Intrinsic::smin, a, b);
      case Op::And:
        return b_.CreateAnd(a, b);
      case Op::Or:
        return b_.CreateOr(a, b);
      default:
        break;  // integer division is never lowered (ATen divides in float)
    }
  }
  unsupported(std::string(kernel::op_name(e.op)) + " on " + ir::dtype_name(t));
}

}  // namespace kiln::codegen
