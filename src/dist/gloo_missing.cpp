// The process group when lazyx is built without Gloo: init explains how to get it.
#include "dist/process_group.h"
#include "lazyx/error.h"

namespace lazyx::dist {

std::unique_ptr<ProcessGroup> make_gloo_group(int, int, const Store&, double) {
  throw Error(
      "[dist.init] lazyx was built without Gloo; install libgloo-dev (scripts/install_deps.sh "
      "dist) and rebuild.");
}

}  // namespace lazyx::dist
