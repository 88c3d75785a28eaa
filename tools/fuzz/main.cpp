// lazyx-fuzz: differential fuzzing of lazyx against an eager oracle. See docs/FUZZING.md.
//
//   lazyx-fuzz [--seed S] [--cases N] [--backend NAME|all] [--min-len A] [--max-len B]
//              [--case I] [--print] [--emit] [--no-shrink] [--keep-going] [--quiet]
//              [--keep-cache] [--other-backends-every K] [--strict] [--tiers]
//   lazyx-fuzz --self-test
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fuzz.h"
#include "lazyx/lazyx.h"

using namespace lazyx;
using namespace lazyx::fuzz;

namespace {

void usage() {
  std::fprintf(
      stderr,
      "usage: lazyx-fuzz [--seed S] [--cases N] [--backend NAME|all] [--min-len A] [--max-len B]\n"
      "                  [--case I] [--print] [--emit] [--no-shrink] [--keep-going] [--quiet]\n"
      "                  [--keep-cache] [--other-backends-every K] [--strict] [--tiers]\n"
      "       lazyx-fuzz --self-test\n"
      "Runs N random programs (case i uses seed hash(S, i)) on every backend and on the eager\n"
      "oracle. --tiers (with --backend cpu) runs each program at the quick tier and then at the\n"
      "full tier and also requires every value read to be bitwise the same. Exit status 0: every\n"
      "case passed and the batch donated; 1: a failure (shrunk and printed as a GoogleTest\n"
      "case); 2: bad usage.\n");
}

void print_stats(const Stats& s, double secs, int64_t cases, int64_t runs) {
  std::printf(
      "lazyx-fuzz: %lld cases, %lld runs in %.1f s: %lld instructions (%lld skipped), %lld expected errors, "
      "%lld reads (%lld values), %lld syncs (%lld mark_step), %lld cache hits; donations: %lld in place, "
      "%lld user-requested, %lld rule-1 checks\n",
      static_cast<long long>(cases), static_cast<long long>(runs), secs, static_cast<long long>(s.executed),
      static_cast<long long>(s.skipped), static_cast<long long>(s.expected_errors),
      static_cast<long long>(s.reads), static_cast<long long>(s.values_compared), static_cast<long long>(s.syncs),
      static_cast<long long>(s.mark_steps), static_cast<long long>(s.cache_hits),
      static_cast<long long>(s.inplace_donations), static_cast<long long>(s.user_donations),
      static_cast<long long>(s.must_donate_checks));
  std::printf("lazyx-fuzz: parameter decisions:");
  for (int i = 0; i <= static_cast<int>(AliasReason::Disabled); ++i) {
    std::printf(" %s %lld", alias_reason_name(static_cast<AliasReason>(i)), static_cast<long long>(s.reasons[i]));
  }
  std::printf("\n");
}

// A wrong oracle must be caught, shrunk to a few instructions, and printed as a test.
int self_test() {
  RunOptions opt;
  opt.oracle_bug = true;
  for (uint64_t i = 0; i < 200; ++i) {
    Program p = generate(case_seed(1, i), 20, 40);
    RunResult r = run(p, opt);
    if (!r.failure.failed) continue;
    if (r.failure.category != "value") {
      std::printf("self-test: FAIL: expected a value mismatch, got %s: %s\n", r.failure.category.c_str(),
                  r.failure.message.c_str());
      return 1;
    }
    Program s = shrink(p, opt, "value");
    std::string code = emit_test(s, opt, "SelfTest", "self-test");
    std::printf("self-test: the injected oracle bug was found in case %llu (%zu instructions), shrunk to %zu:\n%s",
                static_cast<unsigned long long>(i), p.size(), s.size(), code.c_str());
    if (s.size() > 6 || code.find("expect_values(") == std::string::npos) {
      std::printf("self-test: FAIL: the shrunk program is too long or checks no value\n");
      return 1;
    }
    // Determinism: the same seed gives the same program.
    Program again = generate(case_seed(1, i), 20, 40);
    if (again.size() != p.size()) {
      std::printf("self-test: FAIL: generate() is not deterministic\n");
      return 1;
    }
    std::printf("self-test: PASS\n");
    return 0;
  }
  std::printf("self-test: FAIL: the injected oracle bug was never detected\n");
  return 1;
}

// Bad usage: says which option and value are wrong, then exits with status 2.
[[noreturn]] void bad_usage(const std::string& what) {
  std::fprintf(stderr, "lazyx-fuzz: %s\n", what.c_str());
  usage();
  std::exit(2);
}

// A decimal integer in [lo, hi] for `opt`, or bad usage naming both.
int64_t parse_int(const std::string& opt, const std::string& v, int64_t lo, int64_t hi) {
  char* end = nullptr;
  errno = 0;
  long long r = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || errno != 0 || *end != 0 || r < lo || r > hi) {
    bad_usage(opt + ": '" + v + "' is not an integer from " + std::to_string(lo) + " to " +
              std::to_string(hi));
  }
  return r;
}

}  // namespace

int fuzz_main(int argc, char** argv) {
  uint64_t seed = 1;
  int64_t cases = 100, only_case = -1;
  int min_len = 20, max_len = 70;
  std::string backend = "all";
  bool print = false, emit = false, do_shrink = true, keep_going = false, quiet = false, keep_cache = false;
  int64_t slow_every = 1;
  bool strict = true, tiers = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) bad_usage(a + " needs a value");
      return argv[++i];
    };
    constexpr int64_t kMax = int64_t{1} << 40;
    if (a == "--seed") seed = static_cast<uint64_t>(parse_int(a, val(), 0, kMax));
    else if (a == "--cases") cases = parse_int(a, val(), 0, kMax);
    else if (a == "--case") only_case = parse_int(a, val(), 0, kMax);
    else if (a == "--backend") backend = val();
    else if (a == "--min-len") min_len = static_cast<int>(parse_int(a, val(), 1, 100000));
    else if (a == "--max-len") max_len = static_cast<int>(parse_int(a, val(), 1, 100000));
    else if (a == "--print") print = true;
    else if (a == "--emit") emit = true;
    else if (a == "--no-shrink") do_shrink = false;
    else if (a == "--keep-going") keep_going = true;
    else if (a == "--quiet") quiet = true;
    else if (a == "--keep-cache") keep_cache = true;
    else if (a == "--strict") strict = true;
    else if (a == "--tiers")
      tiers = true;
    else if (a == "--other-backends-every") slow_every = parse_int(a, val(), 1, kMax);
    else if (a == "--self-test") return self_test();
    else bad_usage("unknown option '" + a + "'");
  }
  if (max_len < min_len) {
    bad_usage("--max-len " + std::to_string(max_len) + " is below --min-len " +
              std::to_string(min_len));
  }
  std::vector<std::string> backends = backend_names();
  if (backend != "all") {
    if (std::find(backends.begin(), backends.end(), backend) == backends.end()) {
      std::string known;
      for (const std::string& b : backends) known += " " + b;
      bad_usage("--backend: unknown backend '" + backend + "' (built:" + known + ", or all)");
    }
    backends = {backend};
  }
  if (tiers && backends != std::vector<std::string>{"cpu"}) {
    bad_usage("--tiers compares the cpu backend's quick and full tiers: use it with --backend cpu");
  }
  for (const std::string& be : backends) {  // reads the LAZYX_* variables: an invalid one raises
    set_backend(be);
    mark_step();
  }
  auto t0 = std::chrono::steady_clock::now();
  Stats total;
  int64_t runs = 0, failures = 0, ran_cases = 0;
  for (int64_t c = 0; c < cases; ++c) {
    if (only_case >= 0 && c != only_case) continue;
    ran_cases++;
    uint64_t cs = case_seed(seed, static_cast<uint64_t>(c));
    Program p = generate(cs, min_len, max_len);
    if (print) {
      std::printf("case %lld (%zu instructions):\n", static_cast<long long>(c), p.size());
      for (size_t i = 0; i < p.size(); ++i) std::printf("  %3zu %s\n", i, describe(p[i]).c_str());
    }
    for (const std::string& be : backends) {
      // Compiling backends are slow: --other-backends-every K runs them on every K-th case.
      if (be != "reference" && c % slow_every != 0 && only_case < 0) continue;
      RunOptions opt;
      opt.backend = be;
      opt.keep_cache = keep_cache;
      opt.strict = strict;
      opt.tiers = tiers;
      RunResult r;
      try {
        r = run(p, opt);
      } catch (const std::exception& e) {
        r.failure.failed = true;
        r.failure.category = "harness";
        r.failure.message = e.what();
      }
      runs++;
      total.add(r.stats);
      std::string name = "Seed" + std::to_string(seed) + "Case" + std::to_string(c) + "_" + be;
      if (emit && !r.failure.failed) {
        std::printf("%s", emit_test(p, opt, name, "lazyx-fuzz --seed " + std::to_string(seed) + " --case " +
                                                      std::to_string(c) + " --backend " + be).c_str());
      }
      if (!r.failure.failed) continue;
      failures++;
      std::printf("\nFAIL: --seed %llu --case %lld --backend %s: instruction %zu of %zu: [%s] %s\n",
                  static_cast<unsigned long long>(seed), static_cast<long long>(c), be.c_str(), r.failure.at,
                  p.size(), r.failure.category.c_str(), r.failure.message.c_str());
      Program s = p;
      if (do_shrink) {
        s = shrink(p, opt, r.failure.category);
        RunResult again = run(s, opt);
        std::printf("shrunk to %zu instructions: [%s] %s\n", s.size(), again.failure.category.c_str(),
                    again.failure.message.c_str());
      }
      std::printf("%s\n", emit_test(s, opt, name,
                                    "lazyx-fuzz --seed " + std::to_string(seed) + " --case " + std::to_string(c) +
                                        " --backend " + be + ": [" + r.failure.category + "] " +
                                        r.failure.message.substr(0, r.failure.message.find('\n')))
                              .c_str());
      if (!keep_going) {
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        print_stats(total, secs, ran_cases, runs);
        return 1;
      }
    }
    if (!quiet && cases >= 1000 && (c + 1) % 1000 == 0) {
      std::printf("... %lld cases\n", static_cast<long long>(c + 1));
      std::fflush(stdout);
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  print_stats(total, secs, ran_cases, runs);
  if (failures) {
    std::printf("lazyx-fuzz: FAIL: %lld failing runs\n", static_cast<long long>(failures));
    return 1;
  }
  // A fuzzer that never donates proves nothing about donation.
  if (only_case < 0 && ran_cases >= 20 &&
      (total.inplace_donations == 0 || total.user_donations == 0 || total.must_donate_checks == 0)) {
    std::printf("lazyx-fuzz: FAIL: the batch never exercised donation (in place %lld, user %lld, rule-1 checks %lld)\n",
                static_cast<long long>(total.inplace_donations), static_cast<long long>(total.user_donations),
                static_cast<long long>(total.must_donate_checks));
    return 1;
  }
  std::printf("lazyx-fuzz: PASS\n");
  return 0;
}

// An engine error outside a case (an invalid LAZYX_* variable, say) is a usage error too.
int main(int argc, char** argv) {
  try {
    return fuzz_main(argc, argv);
  } catch (const lazyx::Error& e) {
    std::fprintf(stderr, "lazyx-fuzz: %s\n", e.what());
    return 2;
  }
}
