// Helpers for counter structs declared once as an X-macro list of names, X(name): the list makes
// the fields, the walk over them (for JSON, telemetry and tests) and the sum (per-lcore copies
// added up), so that a counter added to the list is in all of them.
//
//   #define MY_COUNTERS(X) X(sent) X(received)
//   struct MyCounters {
//     MY_COUNTERS(SPRAYNET_COUNTER_FIELD)
//     SPRAYNET_COUNTER_METHODS(MyCounters, MY_COUNTERS)
//   };
//   static_assert(sizeof(MyCounters) == sizeof(uint64_t) * SPRAYNET_COUNTER_COUNT(MY_COUNTERS));
//
// The static_assert keeps the struct to the list: a field declared outside it changes the size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "dataplane/wire/packet_parser.h"

#define SPRAYNET_COUNTER_FIELD(name) uint64_t name = 0;
#define SPRAYNET_COUNTER_VISIT(name) f(std::string_view(#name), name);
#define SPRAYNET_COUNTER_ADD(name) name += o.name;
#define SPRAYNET_COUNTER_PLUS_ONE(name) +1
#define SPRAYNET_COUNTER_COUNT(LIST) (size_t{0} LIST(SPRAYNET_COUNTER_PLUS_ONE))

// for_each(f): f(name, value) for every counter, in list order (a non-const struct passes
// uint64_t&); operator+=: counter by counter; kCounters: how many.
#define SPRAYNET_COUNTER_METHODS(Struct, LIST)                                             \
  static constexpr size_t kCounters = SPRAYNET_COUNTER_COUNT(LIST);                        \
  template <class F>                                                                       \
  void for_each(F&& f) const {                                                             \
    LIST(SPRAYNET_COUNTER_VISIT)                                                           \
  }                                                                                        \
  template <class F>                                                                       \
  void for_each(F&& f){LIST(SPRAYNET_COUNTER_VISIT)} Struct& operator+=(const Struct& o) { \
    LIST(SPRAYNET_COUNTER_ADD)                                                             \
    return *this;                                                                          \
  }

// A node's drop counters: `std::array<uint64_t, kParseStatusCount> parse` (by ParseStatus, kOk
// never counted) and the node's list of other causes. for_each walks the parse statuses first
// (as counter_name(status): "parse_truncated_udp"), then the list; total() is the sum of all.
#define SPRAYNET_DROP_COUNTER_METHODS(Struct, LIST)                                         \
  static constexpr size_t kCounters = kParseStatusCount - 1 + SPRAYNET_COUNTER_COUNT(LIST); \
  template <class F>                                                                        \
  void for_each(F&& f) const {                                                              \
    for (size_t s = 1; s < kParseStatusCount; ++s) {                                        \
      f(::spraynet::counter_name(static_cast<::spraynet::ParseStatus>(s)), parse[s]);       \
    }                                                                                       \
    LIST(SPRAYNET_COUNTER_VISIT)                                                            \
  }                                                                                         \
  template <class F>                                                                        \
  void for_each(F&& f) {                                                                    \
    for (size_t s = 1; s < kParseStatusCount; ++s) {                                        \
      f(::spraynet::counter_name(static_cast<::spraynet::ParseStatus>(s)), parse[s]);       \
    }                                                                                       \
    LIST(SPRAYNET_COUNTER_VISIT)                                                            \
  }                                                                                         \
  uint64_t total() const {                                                                  \
    uint64_t t = 0;                                                                         \
    for_each([&t](std::string_view, uint64_t v) { t += v; });                               \
    return t;                                                                               \
  }                                                                                         \
  Struct& operator+=(const Struct& o) {                                                     \
    for (size_t s = 0; s < kParseStatusCount; ++s) parse[s] += o.parse[s];                  \
    LIST(SPRAYNET_COUNTER_ADD)                                                              \
    return *this;                                                                           \
  }
