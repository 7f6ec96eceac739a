// The header as C++17 (-Wall -Wextra -Werror): it compiles, its functions
// are noexcept, its structs have the C layout, and a small RAII wrapper of
// the kind a C++ engine writes decides the GC-pause story.
#include "fencing_guard.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <string_view>
#include <type_traits>

static_assert(sizeof(fencing_verdict) == 56, "fencing_verdict");
static_assert(offsetof(fencing_verdict, admitted) == 48, "fencing_verdict.admitted");
static_assert(sizeof(fencing_fence) == 40 && sizeof(fencing_sequencer) == 40, "inputs");
static_assert(std::is_trivially_copyable_v<fencing_verdict>, "a plain struct");
static_assert(noexcept(fencing_admit(nullptr, nullptr, nullptr, 0, nullptr, nullptr)), "no exception crosses");
static_assert(noexcept(fencing_guard_close(nullptr)), "no exception crosses");
static_assert(FENCING_GUARD_ABI_VERSION == ((FENCING_GUARD_ABI_MAJOR << 16) | FENCING_GUARD_ABI_MINOR), "version");

namespace {

struct Close {
    void operator()(fencing_guard *g) const noexcept { fencing_guard_close(g); }
};
using Guard = std::unique_ptr<fencing_guard, Close>;

fencing_sequencer presented(std::string_view lock, uint64_t token) {
    fencing_sequencer s{};
    s.lock = lock.data();
    s.lock_len = lock.size();
    s.token = token;
    return s;
}

}  // namespace

int main() {
    fencing_guard *raw = nullptr;
    fencing_error err{};
    if (fencing_guard_open(nullptr, nullptr, &raw, &err) != FENCING_OK) {
        std::fprintf(stderr, "header.cpp: %s (%s)\n", err.message, err.reason);
        return 1;
    }
    Guard guard(raw);
    fencing_fence fence{};
    std::string_view lock = "locks/orders";
    fence.lock = lock.data();
    fence.lock_len = lock.size();
    fence.high_water = 34;
    fencing_sequencer late = presented(lock, 33);
    fencing_verdict v{};
    if (fencing_admit(guard.get(), &fence, &late, FENCING_NON_DECREASING, &v, &err) != FENCING_OK || v.admitted ||
        v.code != FENCING_STALE_TOKEN || std::strcmp(fencing_reason(v.code), "stale_token") != 0) {
        std::fprintf(stderr, "header.cpp: token 33 after 34 was not refused as stale\n");
        return 1;
    }
    std::printf("header (C++17): 1 passed, 0 failed\n");
    return 0;
}
