#include "runtime/buffer.h"

#include "runtime/allocator.h"

namespace lazyx::runtime {

namespace {
std::atomic<int64_t> next_buffer_id{1};
}

Buffer::Buffer(size_t bytes)
    : id_(next_buffer_id.fetch_add(1)), data_(allocate(bytes)), bytes_(bytes) {}

Buffer::~Buffer() { deallocate(data_, bytes_); }

}  // namespace lazyx::runtime
