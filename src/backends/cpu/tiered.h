// Tiered compilation: new kernels are compiled quickly first (LLVM's fast instruction selection
// and register allocation after the same O3 IR pipeline, so they compute bitwise alike), and a
// background thread recompiles them with full code generation; programs swap the faster code
// in at the start of a later run.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace lazyx::cpu::cg {

struct KernelCode;

// The full-tier kernels the background compiler finished for one program.
struct UpgradeSlot {
  std::mutex mu;
  std::atomic<bool> any{false};
  std::vector<std::pair<size_t, std::shared_ptr<KernelCode>>> ready;  // (item index, code)
};

struct UpgradeItem {
  std::weak_ptr<UpgradeSlot> slot;  // expired: the program is gone, the kernel is skipped
  size_t index;     // the program's index for this kernel
  std::string ir;   // its unoptimized IR (the in-process cache key)
  std::string math; // the math mode it was built in (part of the persistent cache key)
};

// Queues kernels for the background compiler (started on first use).
void enqueue_upgrades(std::vector<UpgradeItem> items);
// Compiles one kernel's IR at the full tier, or finds it in the in-process or persistent cache
// (codegen.cpp). Runs on the background thread; errors are returned as a null result.
std::shared_ptr<KernelCode> compile_full_kernel(const std::string& ir, const std::string& math);

}  // namespace lazyx::cpu::cg
