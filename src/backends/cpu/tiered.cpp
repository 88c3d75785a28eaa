// The background compiler of tiered compilation: one low-priority thread that recompiles quick
// kernels at the full tier, skipping those of programs that are gone. At exit it finishes its
// queue when a persistent cache is on, so the next process loads full-tier kernels; otherwise it
// stops after the kernel at hand.
#include "backends/cpu/tiered.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <thread>

#include "backends/cpu/codegen.h"
#include "backends/cpu/persistent_cache.h"
#include "lazyx/diagnostics.h"
#include "runtime/env.h"

namespace lazyx::cpu {

namespace cg {

namespace {

void at_exit();

class Upgrader {
 public:
  Upgrader() : pid_(getpid()), thread_([this] { loop(); }) {}

  void push(std::vector<UpgradeItem> items) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& it : items) queue_.push_back(std::move(it));
    }
    cv_.notify_all();
  }

  void wait_idle() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
  }

  // At exit: finish the queue (drain) or drop it, then join.
  void stop(bool drain) {
    if (getpid() != pid_) return;  // a forked child: the thread is not ours
    if (drain) wait_idle();
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.clear();
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop() {
    // Below the steps' threads: it takes idle cores, not the training's.
    pthread_setname_np(pthread_self(), "lazyx-compile");
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
    for (;;) {
      UpgradeItem item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        busy_ = false;
        if (queue_.empty()) idle_cv_.notify_all();
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        item = std::move(queue_.front());
        queue_.pop_front();
        busy_ = true;
      }
      if (item.slot.expired()) continue;  // the program is gone
      std::shared_ptr<KernelCode> code;
      {
        ProfileSpan span("llvm compile (full tier)", "compile");
        code = compile_full_kernel(item.ir, item.math);
      }
      // LLVM builds function-local statics on first use; exit destroys those built after a
      // handler before running it. Registering again after each compile keeps the stop (which
      // waits for the compile at hand) ahead of every static LLVM has built so far.
      std::atexit(at_exit);
      std::shared_ptr<UpgradeSlot> slot = item.slot.lock();
      if (code && slot) {
        std::lock_guard<std::mutex> lock(slot->mu);
        slot->ready.emplace_back(item.index, std::move(code));
        slot->any.store(true, std::memory_order_release);
      }
    }
  }

  pid_t pid_;
  std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<UpgradeItem> queue_;
  bool busy_ = false, stopping_ = false;
  std::thread thread_;  // last: started once the rest is built
};

std::mutex g_mu;
Upgrader* g_upgrader = nullptr;  // never deleted: stopped and joined at exit
bool g_exited = false;           // after exit began, quick kernels stay quick

void at_exit() {
  Upgrader* u;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    u = g_upgrader;
    g_upgrader = nullptr;  // the later registrations find nothing to stop
    g_exited = true;
  }
  if (u) u->stop(!persistent_cache_dir().empty());
}

// A forked child has no compiler thread: it starts its own on first use.
void in_child() { g_upgrader = nullptr; }

Upgrader* upgrader() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_exited) return nullptr;
  if (!g_upgrader) {
    static bool registered = false;
    if (!registered) {
      registered = true;
      pthread_atfork(nullptr, nullptr, in_child);
    }
    g_upgrader = new Upgrader();
  }
  return g_upgrader;
}

}  // namespace

void enqueue_upgrades(std::vector<UpgradeItem> items) {
  if (items.empty()) return;
  if (Upgrader* u = upgrader()) {
    std::atexit(at_exit);  // after the statics the quick compile built (see loop())
    u->push(std::move(items));
  }
}

}  // namespace cg

bool tiered_compile() { return env::flag("LAZYX_CPU_TIERED", true); }

void wait_for_upgrades() {
  cg::Upgrader* u;
  {
    std::lock_guard<std::mutex> lock(cg::g_mu);
    u = cg::g_upgrader;
  }
  if (u) u->wait_idle();
}

}  // namespace lazyx::cpu
