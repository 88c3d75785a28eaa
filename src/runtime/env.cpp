#include "runtime/env.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "lazyx/error.h"

namespace lazyx::env {

namespace {

std::string lower(const char* v) {
  std::string s(v);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

[[noreturn]] void bad(const char* name, const char* v, const std::string& accepts) {
  throw Error(std::string("[env] ") + name + "='" + v + "' is not valid: it accepts " + accepts +
              ". Fix or unset the variable.");
}

}  // namespace

bool flag(const char* name, bool dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  std::string s = lower(v);
  if (s == "1" || s == "true" || s == "on" || s == "yes") return true;
  if (s == "0" || s == "false" || s == "off" || s == "no") return false;
  bad(name, v, "1 or 0 (also true/false, on/off, yes/no)");
}

int64_t integer(const char* name, int64_t dflt, int64_t lo, int64_t hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  char* end = nullptr;
  errno = 0;
  long long r = std::strtoll(v, &end, 10);
  if (errno != 0 || end == v || *end != 0 || r < lo || r > hi) {
    bad(name, v, "an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  }
  return r;
}

int choice(const char* name, int dflt, std::initializer_list<const char*> choices) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  std::string s = lower(v), accepts;
  int i = 0;
  for (const char* c : choices) {
    if (s == c) return i;
    accepts += (i == 0 ? "" : (i + 1 == static_cast<int>(choices.size()) ? " or " : ", "));
    accepts += c;
    ++i;
  }
  bad(name, v, accepts);
}

int debug_level() { return static_cast<int>(integer("LAZYX_DEBUG", 0, 0, 2)); }

int debug_level_nothrow() {
  try {
    return debug_level();
  } catch (const Error&) {
    return 0;
  }
}

}  // namespace lazyx::env
