#include "ir/shape_infer.h"

#include <algorithm>

#include "lazyx/error.h"

namespace lazyx::ir {

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

void fail(const char* op, const std::string& msg) {
  throw Error(std::string("[") + op + "] " + msg);
}

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  if (a == b) return a;
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      fail(op, "shapes " + shape_str(a) + " and " + shape_str(b) +
                   " cannot be broadcast: dimension " + std::to_string(i) + " has sizes " +
                   std::to_string(da) + " and " + std::to_string(db) +
                   ". Sizes must match or be 1.");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t wrap_dim(const char* op, int64_t dim, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r) {
    fail(op, "dimension " + std::to_string(dim) + " is out of range for a tensor of rank " +
                 std::to_string(rank) + " (expected [" + std::to_string(-r) + ", " +
                 std::to_string(r - 1) + "]).");
  }
  return dim < 0 ? dim + r : dim;
}

std::vector<int64_t> wrap_dims(const char* op, const std::vector<int64_t>& dims, int64_t rank) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (int64_t d : dims) {
    int64_t w = wrap_dim(op, d, rank);
    if (rank == 0) continue;
    if (std::find(out.begin(), out.end(), w) != out.end()) {
      fail(op, "dimension " + std::to_string(d) + " appears twice in the list of dims.");
    }
    out.push_back(w);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Shape reduce_shape(const Shape& in, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t i = 0; i < static_cast<int64_t>(in.size()); ++i) {
    bool reduced = std::find(dims.begin(), dims.end(), i) != dims.end();
    if (!reduced) {
      out.push_back(in[i]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

namespace {
int category(Dtype d) { return d == kBool ? 0 : (is_floating(d) ? 2 : 1); }
}  // namespace

Dtype result_type(const PromotionInput* inputs, size_t n) {
  // Promote within each priority class, then let a lower class win only with a higher category.
  bool has[3] = {false, false, false};
  Dtype best[3] = {kBool, kBool, kBool};
  for (size_t i = 0; i < n; ++i) {
    const PromotionInput& in = inputs[i];
    if (!has[in.kind]) {
      best[in.kind] = in.dtype;
      has[in.kind] = true;
    } else {
      best[in.kind] = promote_types(best[in.kind], in.dtype);
    }
  }
  bool any = false;
  Dtype r = kBool;
  for (int k = 0; k < 3; ++k) {
    if (!has[k]) continue;
    if (!any) {
      r = best[k];
      any = true;
    } else if (category(best[k]) > category(r)) {
      // A wrapped float scalar with an integer tensor gives the default dtype, not float64.
      r = (k == 2 && is_floating(best[k])) ? kFloat32 : promote_types(r, best[k]);
      if (k == 2 && category(best[k]) == 1) r = kInt64;
    }
  }
  return r;
}

}  // namespace lazyx::ir
