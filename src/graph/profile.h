// The timeline's recorder (profile.cpp): spans on any thread, kept in memory while a profile
// runs and written as Chrome trace-event JSON at profile_end.
#pragma once

#include <atomic>
#include <string>

namespace lazyx::profile {

extern std::atomic<bool> g_on;
inline bool on() { return g_on.load(std::memory_order_relaxed); }

// Counts profile_begin calls: which profile a recorded time belongs to.
int64_t generation();
// Microseconds on the profile's clock.
double now_us();
// A finished span on the calling thread; `args` is a JSON object's body ("\"k\": 1") or empty.
void record(const std::string& name, const char* category, double start_us, double end_us,
            const std::string& args = {});
// JSON string literal of `s`, quotes included.
std::string json_str(const std::string& s);

}  // namespace lazyx::profile
