#include "backend/codegen/llvm/emitter_core.h"

#include "kiln/error.h"

namespace kiln::codegen {

using kernel::DType;
using kernel::Op;
using kernel::ReduceKind;

EmitterCore::EmitterCore(llvm::Module& module, const kernel::Kernel& kernel, int vector_bits,
                         MathTarget math)
    : module_(module),
      kernel_(kernel),
      b_(module.getContext()),
      vector_bits_(vector_bits),
      math_(math) {}

llvm::Function* EmitterCore::emit() {
  llvm::LLVMContext& c = module_.getContext();
  llvm::Type* ptr = llvm::PointerType::getUnqual(c);
  llvm::Type* i64 = llvm::Type::getInt64Ty(c);
  auto* type = llvm::FunctionType::get(llvm::Type::getVoidTy(c), {ptr, ptr, i64, i64}, false);
  fn_ = llvm::Function::Create(type, llvm::Function::ExternalLinkage, kernel_.name, module_);
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  fn_->addParamAttr(0, llvm::Attribute::NoAlias);
  fn_->addParamAttr(1, llvm::Attribute::NoAlias);
  entry_ = llvm::BasicBlock::Create(c, "entry", fn_);
  b_.SetInsertPoint(entry_);
  // No FMA contraction: a value recomputed in two passes over a row (softmax's x, then
  // x - max) must round the same way in both, or x - max can come out positive and overflow.
  std::vector<llvm::Value*> buffers;
  for (size_t i = 0; i < kernel_.buffers.size(); ++i) {
    llvm::Value* slot = b_.CreateConstGEP1_64(ptr, fn_->getArg(0), i);
    buffers.push_back(b_.CreateAlignedLoad(ptr, slot, llvm::Align(8), "b" + std::to_string(i)));
  }
  std::vector<llvm::Value*> inputs;
  for (size_t i = 0; i < kernel_.size_inputs.size(); ++i) {
    llvm::Value* slot = b_.CreateConstGEP1_64(i64, fn_->getArg(1), i);
    inputs.push_back(b_.CreateAlignedLoad(i64, slot, llvm::Align(8), "s" + std::to_string(i)));
  }
  sizes_ = std::make_unique<SizeValues>(b_, kernel_, std::move(inputs));
  values_ = std::make_unique<ValueEmitter>(b_, kernel_, buffers, math_, sizes_.get());
  element_ = kernel::element_levels(kernel_);
  num_maps_ = kernel_.exprs.size() + kernel_.stores.size();
  width_ = std::max(1, vector_bits_ / 32);
  emit_body();
  b_.CreateRetVoid();
  return fn_;
}

llvm::Value* EmitterCore::loop(llvm::Value* start, llvm::Value* end, int64_t step,
                               const std::function<void(llvm::Value*)>& body) {
  llvm::LLVMContext& c = module_.getContext();
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(c, "loop", fn_);
  auto* inside = llvm::BasicBlock::Create(c, "body", fn_);
  auto* exit = llvm::BasicBlock::Create(c, "done", fn_);
  b_.CreateBr(header);
  b_.SetInsertPoint(header);
  llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2);
  i->addIncoming(start, pre);
  b_.CreateCondBr(b_.CreateICmpSLE(b_.CreateAdd(i, i64(step)), end), inside, exit);
  b_.SetInsertPoint(inside);
  body(i);
  i->addIncoming(b_.CreateAdd(i, i64(step)), b_.GetInsertBlock());
  b_.CreateBr(header);
  b_.SetInsertPoint(exit);
  return i;
}

EmitterCore::Offsets EmitterCore::row_offsets(llvm::Value* row, int dims) {
  std::vector<llvm::Value*> index(dims);
  llvm::Value* rest = row;
  for (int d = dims - 1; d >= 0; --d) {
    llvm::Value* size = sizes_->size(d);
    index[d] = d == 0 ? rest : b_.CreateURem(rest, size);
    if (d > 0) rest = b_.CreateUDiv(rest, size);
  }
  std::vector<llvm::Value*> offsets(num_maps_, nullptr);
  for (size_t m = 0; m < num_maps_; ++m) {
    if (m < kernel_.exprs.size() && kernel_.exprs[m].op != Op::Load) continue;
    const kernel::IndexMap& map = values_->map(static_cast<int>(m));
    llvm::Value* offset = sizes_->offset(map);
    for (int d = 0; d < dims; ++d) {
      if (map.strides[d] != 0)
        offset = b_.CreateAdd(offset, b_.CreateMul(index[d], sizes_->stride(map, d)));
    }
    offsets[m] = offset;
  }
  return offsets;
}

void EmitterCore::walk_runs(
    int dim, const std::function<void(llvm::Value*, llvm::Value*, const Offsets&)>& body) {
  // A constant empty dim has no runs (a size input of 0 gives an empty launch range instead).
  if (sizes_->constant_size(dim) && kernel_.sizes[dim] == 0) return;
  llvm::Value* end = this->end();
  if (dim == 0) {
    // One run, [begin, end) itself: the code does not depend on the size (kernel_emitter.h,
    // code_key).
    body(begin(), end, row_offsets(i64(0), 0));
    return;
  }
  llvm::Value* run = sizes_->size(dim);
  llvm::LLVMContext& c = module_.getContext();
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(c, "runs", fn_);
  auto* inside = llvm::BasicBlock::Create(c, "run", fn_);
  auto* exit = llvm::BasicBlock::Create(c, "runs_done", fn_);
  b_.CreateBr(header);
  b_.SetInsertPoint(header);
  llvm::PHINode* pos = b_.CreatePHI(b_.getInt64Ty(), 2);
  pos->addIncoming(begin(), pre);
  b_.CreateCondBr(b_.CreateICmpSLT(pos, end), inside, exit);
  b_.SetInsertPoint(inside);
  llvm::Value* outer = b_.CreateUDiv(pos, run);
  llvm::Value* first = b_.CreateSub(pos, b_.CreateMul(outer, run));
  llvm::Value* count = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateSub(run, first),
                                                b_.CreateSub(end, pos));
  body(first, b_.CreateAdd(first, count), row_offsets(outer, dim));
  pos->addIncoming(b_.CreateAdd(pos, count), b_.GetInsertBlock());
  b_.CreateBr(header);
  b_.SetInsertPoint(exit);
}

EmitterCore::Offsets EmitterCore::moved(const Offsets& offsets, int dim, llvm::Value* i) {
  Offsets out = offsets;
  for (size_t m = 0; m < num_maps_; ++m) {
    if (!out[m]) continue;
    const kernel::IndexMap& map = values_->map(static_cast<int>(m));
    if (map.strides[dim] != 0)
      out[m] = b_.CreateAdd(out[m], b_.CreateMul(i, sizes_->stride(map, dim)));
  }
  return out;
}

void EmitterCore::compute_row_values(const Position& at_row) {
  for (size_t i = 0; i < kernel_.exprs.size(); ++i) {
    const int id = static_cast<int>(i);
    const kernel::Expr& e = kernel_.exprs[i];
    if (element_[i] || e.op == Op::Reduce || values_->has_row_value(id)) continue;
    bool ready = true;
    for (int a : e.args)
      ready = ready && values_->has_row_value(a);
    if (ready) values_->set_row_value(id, values_->row_expr(id, at_row));
  }
}

llvm::Value* EmitterCore::identity(ReduceKind kind, DType t, int width) {
  llvm::Type* type = values_->register_type(t, width);
  if (kind == ReduceKind::Sum || kind == ReduceKind::Mean)
    return llvm::Constant::getNullValue(type);
  const bool max = kind == ReduceKind::Max;
  if (ir::is_floating(t)) return llvm::ConstantFP::getInfinity(type, max);
  const unsigned bits = type->getScalarSizeInBits();
  const bool is_unsigned = t == DType::UInt8 || t == DType::Bool;
  llvm::APInt v =
      is_unsigned
          ? (max ? llvm::APInt::getMinValue(bits) : llvm::APInt::getMaxValue(bits))
          : (max ? llvm::APInt::getSignedMinValue(bits) : llvm::APInt::getSignedMaxValue(bits));
  return llvm::ConstantInt::get(type, v);
}

llvm::Value* EmitterCore::combine(ReduceKind kind, DType t, llvm::Value* acc, llvm::Value* v) {
  const bool f = ir::is_floating(t);
  const bool u = t == DType::UInt8 || t == DType::Bool;
  switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::Mean:
      return f ? b_.CreateFAdd(acc, v) : b_.CreateAdd(acc, v);
    case ReduceKind::Max:
      // Floats: a plain compare-and-select (one vmaxps); NaN is tracked apart, off the chain.
      if (f) return b_.CreateSelect(b_.CreateFCmpOGT(v, acc), v, acc);
      return b_.CreateBinaryIntrinsic(u ? llvm::Intrinsic::umax : llvm::Intrinsic::smax, acc, v);
    case ReduceKind::Min:
      if (f) return b_.CreateSelect(b_.CreateFCmpOLT(v, acc), v, acc);
      return b_.CreateBinaryIntrinsic(u ? llvm::Intrinsic::umin : llvm::Intrinsic::smin, acc, v);
  }
  return acc;
}

llvm::Value* EmitterCore::finish_reduction(const kernel::Expr& e, llvm::Value* result) {
  const DType t = e.dtype;
  if (e.reduce == ReduceKind::Mean) {
    // The interpreter divides the exact (int64) sum; torch has no integer mean.
    if (!ir::is_floating(t))
      throw Error(ErrorKind::Unsupported,
                  std::string("LLVM codegen: mean of ") + ir::dtype_name(t));
    llvm::Type* type = result->getType();
    llvm::Value* n = llvm::ConstantFP::get(type, static_cast<double>(kernel_.row_size()));
    if (!sizes_->constant_row_size()) {
      n = b_.CreateSIToFP(sizes_->row_size(), type->getScalarType());
      if (auto* vector = llvm::dyn_cast<llvm::FixedVectorType>(type))
        n = b_.CreateVectorSplat(vector->getNumElements(), n);
    }
    result = b_.CreateFDiv(result, n);
  }
  // A float16/bfloat16 sum is accumulated in float: round it to its format, as every value of
  // that dtype must be.
  if ((e.reduce == ReduceKind::Sum || e.reduce == ReduceKind::Mean) &&
      (t == DType::Float16 || t == DType::BFloat16))
    result = values_->convert(result, DType::Float32, t);
  return result;
}

}  // namespace kiln::codegen
