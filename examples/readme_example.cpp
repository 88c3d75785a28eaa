// The README's ten-line example, built so that it stays true.
#include <lazyx/lazyx.h>
#include <iostream>

int main() {
  lazyx::Tensor w = lazyx::randn({1024, 1024});
  lazyx::Tensor g = lazyx::ones({1024, 1024});
  lazyx::mark_step();               // w and g now hold buffers
  w.add_(g, -0.1);                  // recorded, not run
  lazyx::mark_step();               // one program; w's buffer is donated to its new value
  std::cout << lazyx::last_step().to_string() << lazyx::memory_stats().to_string() << "\n";
}
