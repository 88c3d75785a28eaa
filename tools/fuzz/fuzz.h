// lazyx-fuzz: random programs over a few tensors, run on lazyx (every backend) and on the eager
// oracle, compared value by value, with the donation rules of ALIASING.md checked at every sync.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "oracle.h"

namespace lazyx::fuzz {

constexpr int kSlots = 6;

// Instruction kinds. Operands name slots; integer fields are resolved against the shapes at run
// time (dim = i0 % rank, ...), so every instruction stays meaningful when others are removed
// by the shrinker. An instruction whose operands are missing or do not fit is skipped.
enum class K : uint8_t {
  Const, Full, Arange, ScalarT,       // creation into d
  Unary, UnaryI,                      // op: kUnary index
  Binary, BinaryI,                    // op: kBinary index; s0: alpha
  BinS, BinSI,                        // op: kBinS index; s0: the scalar
  Clamp, ClampI,                      // s0, s1: bounds
  Reduce,                             // op: sum mean amax amin logsumexp; i0: dims mask; i1: keepdim
  Softmax, Matmul, Where,
  Select, Slice, Transpose, Reshape, View, Unsqueeze, Expand, Permute,
  Clone, Contig, To, Dup, Drop,
  Copy, Fill, MaskedFill, IndexSelect, IndexCopy,
  Donate, Undonate, Read, Sync, MarkStep,
  kCount,
};
const char* kind_name(K k);

struct Ins {
  K k = K::MarkStep;
  int d = 0, a = 0, b = 0;  // destination and operand slots
  int op = 0;
  int64_t i0 = 0, i1 = 0, i2 = 0, i3 = 0;
  double s0 = 0, s1 = 0;
  Shape shape;
  std::vector<double> vals;
};
using Program = std::vector<Ins>;
std::string describe(const Ins& in);

struct Stats {
  int64_t executed = 0, skipped = 0, expected_errors = 0;
  int64_t reads = 0, values_compared = 0;
  int64_t syncs = 0, mark_steps = 0;
  int64_t inplace_donations = 0, user_donations = 0;  // as reported by last_step()
  int64_t must_donate_checks = 0;                     // rule 1 cases the oracle proved
  int64_t cache_hits = 0;
  int64_t reasons[16] = {};  // parameter decisions seen, by AliasReason
  void add(const Stats& o);
};

struct Failure {
  bool failed = false;
  std::string category;  // value, unexpected-error, missing-error, donation-missing, ...
  std::string message;
  size_t at = 0;  // instruction index (program size = the final mark_step)
};

struct RunOptions {
  std::string backend = "reference";
  bool emit = false;          // record the run as C++ test code
  bool oracle_bug = false;    // self-test: a deliberately wrong oracle (add is off by 1/64)
  bool keep_cache = false;    // do not clear the program cache before the run
  // Check rule 1 even at steps where a user-flagged buffer of the same byte size is live. Off
  // by default until the bug in tests/test_fuzz_regressions.cpp
  // (DISABLED_UserDonationTakesTheOutputOfAnInPlaceTensor) is fixed.
  bool strict = true;
  // Run on the cpu backend twice, quick tier then full tier (no persistent cache), and fail
  // ("tiers") unless every value read is bitwise the same.
  bool tiers = false;
};

struct RunResult {
  Failure failure;
  Stats stats;
  std::vector<std::string> code;  // with emit: the test body
  std::vector<std::vector<double>> reads;  // every value the engine returned, in order
};

Program generate(uint64_t seed, int min_len, int max_len);
RunResult run(const Program& p, const RunOptions& opt);
// Removes instructions while the run still fails with the same category.
Program shrink(const Program& p, const RunOptions& opt, const std::string& category,
               int max_runs = 3000);
std::string emit_test(const Program& p, const RunOptions& opt, const std::string& test_name,
                      const std::string& comment);

uint64_t case_seed(uint64_t seed, uint64_t index);

}  // namespace lazyx::fuzz
