#pragma once

// Whether this build runs under a sanitizer, for the tests that must adapt
// to one (fewer ranks, Open MPI's leaks left unchecked). g++ says so with
// __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__; clang 14 only through
// __has_feature, which g++ 12 does not have.
#if defined(__has_feature)
#define MCI_TEST_HAS_FEATURE(x) __has_feature(x)
#else
#define MCI_TEST_HAS_FEATURE(x) 0
#endif

namespace mci::test {

#if defined(__SANITIZE_ADDRESS__) || MCI_TEST_HAS_FEATURE(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

#if defined(__SANITIZE_THREAD__) || MCI_TEST_HAS_FEATURE(thread_sanitizer)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif

}  // namespace mci::test

#undef MCI_TEST_HAS_FEATURE
