// Linked into every test executable: unless the caller chose a compile cache folder, the tests
// use a fresh temporary one (removed at exit), never the user's ~/.cache/lazyx.
#include <stdlib.h>

#include <filesystem>
#include <string>

namespace {

struct TempCompileCache {
  std::string dir;
  TempCompileCache() {
    if (getenv("LAZYX_CACHE_DIR")) return;
    char tmpl[] = "/tmp/lazyx-test-cache-XXXXXX";
    if (!mkdtemp(tmpl)) return;
    dir = tmpl;
    setenv("LAZYX_CACHE_DIR", tmpl, 1);
  }
  ~TempCompileCache() {
    if (dir.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

TempCompileCache temp_compile_cache;

}  // namespace
