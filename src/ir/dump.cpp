// Graph dumps: text (like torch_xla's _get_xla_tensors_text) and DOT.
#include <sstream>
#include <unordered_map>

#include "ir/shape_infer.h"
#include "lazyx/debug.h"
#include "runtime/buffer.h"
#include "tensor/tensor_impl.h"

namespace lazyx {

namespace {

struct Dump {
  std::vector<const ir::Node*> order;
  std::unordered_map<const ir::Node*, int> index;
  std::vector<std::pair<int, int64_t>> roots;  // node index, tensor id
  std::vector<ir::NodePtr> keep;  // the roots: view gathers made just for the dump die with it
};

Dump collect(const std::vector<Tensor>& tensors) {
  Dump d;
  std::vector<std::pair<const ir::Node*, size_t>> stack;
  for (const Tensor& t : tensors) {
    const TensorImpl& i = impl_of("graph_text", t);
    ir::NodePtr root = i.value("graph_text");
    d.keep.push_back(root);
    if (!d.index.count(root.get())) {
      stack.emplace_back(root.get(), 0);
      while (!stack.empty()) {
        auto& [n, next] = stack.back();
        if (next < n->operands().size()) {
          const ir::Node* c = n->operands()[next++].get();
          if (!d.index.count(c)) stack.emplace_back(c, 0);
          continue;
        }
        if (!d.index.count(n)) {
          d.index[n] = static_cast<int>(d.order.size());
          d.order.push_back(n);
        }
        stack.pop_back();
      }
    }
    d.roots.emplace_back(d.index[root.get()], i.id());
  }
  return d;
}

std::string label(const ir::Node* n, const Dump& d) {
  std::ostringstream os;
  os << dtype_name(n->dtype()) << ir::shape_str(n->shape()) << " " << ir::op_name(n->op()) << "(";
  for (size_t k = 0; k < n->operands().size(); ++k) {
    os << (k ? ", " : "") << "%" << d.index.at(n->operands()[k].get());
  }
  os << ")";
  const ir::Attrs& a = n->attrs();
  if (!a.ints.empty()) os << ", ints=" << ir::shape_str(a.ints);
  if (a.i0) os << ", i0=" << a.i0;
  if (a.flag) os << ", flag=1";
  if (n->op() == ir::Op::Parameter) os << ", buffer=" << n->buffer()->id();
  if (n->op() == ir::Op::Scalar) {
    if (is_floating(n->dtype())) os << ", value=" << n->scalar_f(); else os << ", value=" << n->scalar_i();
  }
  return os.str();
}

}  // namespace

std::string graph_text(const std::vector<Tensor>& tensors) {
  EngineLock lock(engine_mutex());
  Dump d = collect(tensors);
  std::ostringstream os;
  os << "IR {\n";
  for (size_t k = 0; k < d.order.size(); ++k) os << "  %" << k << " = " << label(d.order[k], d) << "\n";
  for (size_t r = 0; r < d.roots.size(); ++r) {
    os << "  ROOT " << r << " = %" << d.roots[r].first << "  (tensor " << d.roots[r].second << ")\n";
  }
  os << "}\n";
  return os.str();
}

std::string graph_dot(const std::vector<Tensor>& tensors) {
  EngineLock lock(engine_mutex());
  Dump d = collect(tensors);
  std::ostringstream os;
  os << "digraph G {\n";
  for (size_t k = 0; k < d.order.size(); ++k) {
    const ir::Node* n = d.order[k];
    os << "  node" << k << " [label=\"%" << k << " " << ir::op_name(n->op()) << "\\n"
       << dtype_name(n->dtype()) << ir::shape_str(n->shape()) << "\"";
    if (n->op() == ir::Op::Parameter) os << ", shape=box";
    os << "];\n";
    for (const auto& o : n->operands()) os << "  node" << d.index.at(o.get()) << " -> node" << k << ";\n";
  }
  for (size_t r = 0; r < d.roots.size(); ++r) {
    os << "  root" << r << " [label=\"tensor " << d.roots[r].second << "\", shape=plaintext];\n";
    os << "  node" << d.roots[r].first << " -> root" << r << ";\n";
  }
  os << "}\n";
  return os.str();
}

}  // namespace lazyx
