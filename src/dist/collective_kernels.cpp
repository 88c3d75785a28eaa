// The run-time side of the collective ops, shared by both backends: pack the operands into the
// output buffer, call the process group once, scale.
#include <cstring>
#include <memory>

#include "dist/process_group.h"
#include "lazyx/error.h"

namespace lazyx::dist {

namespace {

using reference::Val;

void scale_in_place(char* data, int64_t n, Dtype d, double s) {
  if (s == 1.0 || n == 0) return;
  switch (d) {
    case kFloat32: {
      auto* p = reinterpret_cast<float*>(data);
      const float f = static_cast<float>(s);
      for (int64_t i = 0; i < n; ++i) p[i] *= f;
      return;
    }
    case kFloat64: {
      auto* p = reinterpret_cast<double*>(data);
      for (int64_t i = 0; i < n; ++i) p[i] *= s;
      return;
    }
    case kFloat16:
    case kBFloat16: {
      auto* p = reinterpret_cast<uint16_t*>(data);
      const float f = static_cast<float>(s);
      const bool bf = d == kBFloat16;
      for (int64_t i = 0; i < n; ++i) {
        float x = (bf ? bf16_to_float(p[i]) : half_to_float(p[i])) * f;
        p[i] = bf ? float_to_bf16(x) : float_to_half(x);
      }
      return;
    }
    default:
      // Tracing refuses a scale on integer tensors; reaching here is a bug.
      throw Error("[all_reduce] internal: a scale on an integer tensor.");
  }
}

double scale_of(const backend::Instr& in, const std::vector<const Val*>& a, size_t idx,
                const ProcessGroup& g) {
  double s = reference::get_f(*a[idx], 0);
  if (static_cast<ReduceOp>(in.attrs.i0) == ReduceOp::Mean) s /= g.size();
  return s;
}

}  // namespace

void run_collective(const backend::Instr& in, const std::vector<const Val*>& a, const Val& out) {
  const char* name = ir::op_name(in.op);
  ProcessGroup& g = group(name);
  const size_t esz = dtype_size(in.dtype);
  // Shapes were fixed at trace time for the group of that time.
  const bool sized = in.op == ir::Op::AllGather ? out.numel() == a[0]->numel() * g.size()
                     : in.op == ir::Op::ReduceScatter ? a[0]->numel() == out.numel() * g.size()
                     : in.op != ir::Op::Broadcast || in.attrs.i0 < g.size();
  if (!sized) {
    throw Error(std::string("[") + name + "] the program was traced for another world size than "
                "the group's " + std::to_string(g.size()) + "; trace it again after init().");
  }
  switch (in.op) {
    case ir::Op::AllReduce: {
      const size_t n = static_cast<size_t>(in.attrs.ints.at(0));
      // Pack: operand 0 first, so running in operand 0's buffer is a no-op copy.
      size_t off = 0;
      for (size_t k = 0; k < n; ++k) {
        size_t bytes = static_cast<size_t>(a[k]->numel()) * esz;
        if (bytes && a[k]->data != out.data + off) std::memmove(out.data + off, a[k]->data, bytes);
        off += bytes;
      }
      g.all_reduce(out.data, out.numel(), in.dtype, static_cast<ReduceOp>(in.attrs.i0));
      scale_in_place(out.data, out.numel(), in.dtype, scale_of(in, a, n, g));
      return;
    }
    case ir::Op::ReduceScatter: {
      const int64_t total = a[0]->numel();
      std::unique_ptr<char[]> tmp(new char[static_cast<size_t>(total) * esz + 1]);
      std::memcpy(tmp.get(), a[0]->data, static_cast<size_t>(total) * esz);
      g.all_reduce(tmp.get(), total, in.dtype, static_cast<ReduceOp>(in.attrs.i0));
      const size_t block = static_cast<size_t>(out.numel()) * esz;
      std::memcpy(out.data, tmp.get() + block * static_cast<size_t>(g.rank()), block);
      scale_in_place(out.data, out.numel(), in.dtype, scale_of(in, a, 1, g));
      return;
    }
    case ir::Op::AllGather:
      g.all_gather(a[0]->data, out.data, a[0]->numel(), in.dtype);
      return;
    case ir::Op::Broadcast: {
      size_t bytes = static_cast<size_t>(out.numel()) * esz;
      if (bytes && a[0]->data != out.data) std::memmove(out.data, a[0]->data, bytes);
      g.broadcast(out.data, out.numel(), in.dtype, static_cast<int>(in.attrs.i0));
      return;
    }
    default:
      throw Error(std::string("[") + name + "] internal: not a collective.");
  }
}

}  // namespace lazyx::dist
