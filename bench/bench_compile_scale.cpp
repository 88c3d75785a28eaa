// Compile time of a chain of n in-place adds (x.add_(one)) against n, each size in a fresh
// process with an empty compile cache, so only loops shared inside one program are reused.
//   bench_compile_scale [--backend NAME] [n ...]   (default cpu; 1000 2000 5000 10000)
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "lazyx/lazyx.h"

using namespace lazyx;

namespace {

int measure(const std::string& backend, int64_t n) {
  char tmpl[] = "/tmp/lazyx-bench-cache-XXXXXX";
  if (!mkdtemp(tmpl)) return 1;
  setenv("LAZYX_CACHE_DIR", tmpl, 1);
  set_backend(backend);
  Tensor one = full({1024}, 1.0f);
  Tensor x = zeros({1024});
  mark_step();
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; ++i) x.add_(one);
  double trace_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  mark_step();
  StepReport r = last_step();
  float v = x.to_vector<float>()[7];
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
  if (v != static_cast<float>(n)) {
    std::fprintf(stderr, "n=%lld: wrong result %g\n", (long long)n, v);
    return 1;
  }
  std::printf("%-9s n=%-7lld compile %8.1f ms  execute %7.2f ms  trace %7.1f ms\n", backend.c_str(),
              (long long)n, r.compile_ms, r.execute_ms, trace_ms);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "cpu";
  std::vector<int64_t> sizes;
  for (int a = 1; a < argc; ++a) {
    std::string s = argv[a];
    if (s == "--backend" && a + 1 < argc) {
      backend = argv[++a];
    } else if (!s.empty() && s[0] != '-') {
      sizes.push_back(std::atoll(s.c_str()));
    } else {
      std::fprintf(stderr, "unknown option %s\n", s.c_str());
      return 2;
    }
  }
  if (sizes.empty()) sizes = {1000, 2000, 5000, 10000};
  int rc = 0;
  for (int64_t n : sizes) {
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      int r = measure(backend, n);
      std::fflush(stdout);
      _exit(r);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  return rc;
}
