// The one exception type. Messages read "[op] what failed. What to do."
#pragma once

#include <stdexcept>
#include <string>

namespace lazyx {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

}  // namespace lazyx
