// The backend interface: memory, and compiling and running lowered graphs with donation.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/node.h"
#include "runtime/buffer.h"

namespace lazyx::backend {

// One instruction of a lowered graph. It holds no buffers, so cached programs keep no memory.
struct Instr {
  ir::Op op;
  Dtype dtype;
  Shape shape;
  ir::Attrs attrs;
  std::vector<int32_t> inputs;  // instruction indices
  int32_t slot = -1;            // parameter or scalar slot
};

struct LoweredGraph {
  std::vector<Instr> instrs;         // in topological order
  std::vector<int32_t> outputs;      // instruction of each program output
  std::vector<int32_t> param_instr;  // instruction of each parameter slot
  int32_t num_scalars = 0;
  std::vector<int32_t> donation;     // per parameter: the output written into its buffer, or -1
};

// Whether instruction x may write its result into the memory of its operand 0 (an in-place
// update: a scatter-like op, or elementwise of the same shape and dtype reading it once).
bool writes_over_operand0(const LoweredGraph& g, int32_t x);

struct ScalarValue {
  double f;
  int64_t i;
};

class Program {
 public:
  virtual ~Program() = default;
  // Bytes of scratch memory one run takes for intermediates (the cpu backend's arena), or -1
  // when the backend does not plan them (the reference interpreter allocates as it goes).
  virtual int64_t scratch_bytes() const { return -1; }
  // Why a donated output is computed into a temporary copy, or "" (see StepReport).
  virtual std::string scratch_reason() const { return ""; }
};

struct ExecArgs {
  std::vector<runtime::Buffer*> params;
  // Per parameter: bytes from the buffer's start where the parameter begins (a window read at a
  // run-time offset); empty means all zero.
  std::vector<int64_t> param_offsets;
  std::vector<ScalarValue> scalars;
  // One per output. Donated outputs arrive holding their parameter's buffer; the backend
  // allocates the rest.
  std::vector<runtime::BufferPtr>* outputs = nullptr;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual runtime::BufferPtr allocate(size_t bytes);
  virtual void upload(runtime::Buffer& dst, const void* src, size_t bytes);
  virtual void download(const runtime::Buffer& src, void* dst, size_t bytes);
  // Raises lazyx::Error naming the op it cannot compile.
  virtual std::unique_ptr<Program> compile(const LoweredGraph& graph) = 0;
  // Raises lazyx::Error on a bad run-time value (an index out of range). Then no donated buffer
  // has been written yet, so the caller's state is unchanged.
  virtual void execute(Program& program, const ExecArgs& args) = 0;
  // Blocks until compiles the backend runs in the background are done.
  virtual void wait_background() {}
  // Threads it runs at once, and at most (set_num_threads checks the range).
  virtual int max_threads() const { return 1; }
  virtual int num_threads() const { return 1; }
  virtual void set_num_threads(int) {}

  bool alive() const { return alive_; }
  void set_alive(bool a) { alive_ = a; }

 private:
  bool alive_ = true;
};

// The active backend; raises if it is dead. `op` names the caller in the error.
Backend& active_backend(const char* op);
std::unique_ptr<Backend> make_reference_backend();
#ifdef LAZYX_HAVE_CPU_BACKEND
std::unique_ptr<Backend> make_cpu_backend();  // src/backends/cpu
#endif

}  // namespace lazyx::backend
