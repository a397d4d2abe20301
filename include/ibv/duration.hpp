// SPDX-License-Identifier: MIT
// ibv::Duration: the one type of every public timeout and length of time.
#pragma once

#include <chrono>
#include <cstdint>
#include <ratio>
#include <type_traits>

namespace ibv {

/// Every timeout the library takes, and every length of time it takes or reports (spin times,
/// ACK and RNR timers), is a Duration: a std::chrono::nanoseconds that any std::chrono duration
/// converts to implicitly (`2s`, `500ms`, `20us`, `1.5s`). The conversion saturates instead of
/// overflowing: anything longer than 100 years (`std::chrono::hours::max()` included) becomes
/// 100 years, which is forever for a wait yet leaves `steady_clock::now() + timeout` in range;
/// anything shorter than minus 100 years becomes minus 100 years. A timeout must be positive
/// unless its documentation says otherwise; what happens when one runs out is in
/// docs/safety.md, "Giving up".
class Duration : public std::chrono::nanoseconds {
 public:
  /// The longest Duration: 100 years.
  static constexpr std::chrono::nanoseconds kLongest{std::int64_t{100} * 365 * 24 * 3600 *
                                                     1'000'000'000};

  constexpr Duration() noexcept = default;
  /// Any std::chrono duration (implicit: `100ms` reads as a Duration), saturated at
  /// kLongest and at -kLongest instead of overflowing (a NaN gives zero).
  template <typename Rep, typename Period>
  requires std::is_arithmetic_v<Rep>
  constexpr Duration(std::chrono::duration<Rep, Period> length) noexcept  // NOLINT: implicit
      : std::chrono::nanoseconds(saturated(length)) {}

 private:
  template <typename Rep, typename Period>
  static constexpr std::chrono::nanoseconds saturated(std::chrono::duration<Rep, Period> length) {
    using Source = std::chrono::duration<Rep, Period>;
    if constexpr (std::is_floating_point_v<Rep>) {
      const long double ns = std::chrono::duration<long double, std::nano>(length).count();
      if (!(ns == ns)) return std::chrono::nanoseconds(0);  // NaN
      const auto longest = static_cast<long double>(kLongest.count());
      if (ns >= longest) return kLongest;
      if (ns <= -longest) return -kLongest;
      return std::chrono::duration_cast<std::chrono::nanoseconds>(length);
    } else if constexpr (std::ratio_less_equal_v<Period, std::nano>) {
      // Nanoseconds or finer: the conversion keeps or divides, so only the clamp is left.
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(length);
      return ns > kLongest ? kLongest : (ns < -kLongest ? -kLongest : ns);
    } else {
      // Coarser: compare in the caller's unit first, so that the conversion cannot overflow.
      constexpr Source kLimit = std::chrono::duration_cast<Source>(kLongest);
      if (length > kLimit) return kLongest;
      if constexpr (std::is_signed_v<Rep>) {
        if (length < -kLimit) return -kLongest;
      }
      return std::chrono::duration_cast<std::chrono::nanoseconds>(length);
    }
  }
};

}  // namespace ibv
