// The PFC frame parser on arbitrary bytes; a frame it accepts is rebuilt and parses the same.
#include <array>
#include <cstring>

#include "dataplane/wire/pfc_frame.h"
#include "fuzz/support.h"

using namespace spraynet;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  PfcFrame f;
  const PfcParseStatus s = parse_pfc_frame(data, size, f);
  if (s != PfcParseStatus::kOk) return 0;
  FUZZ_CHECK(size >= 14 + 2 + 2 + 16);
  std::array<uint8_t, kPfcFrameLength> again{};
  const uint8_t* src = size >= 12 ? data + 6 : kPfcDestMac;
  build_pfc_frame(again.data(), src, f);
  PfcFrame g;
  FUZZ_CHECK(parse_pfc_frame(again.data(), again.size(), g) == PfcParseStatus::kOk);
  FUZZ_CHECK(f == g);
  for (int p = 0; p < kPriorities; ++p) {
    FUZZ_CHECK(!f.is_xon(p) || f.enabled(p));
    // Quanta at 100 Gbit/s: converting back never falls short.
    const uint64_t ns = pfc_quanta_to_ns(f.quanta[p], 100.0);
    FUZZ_CHECK(pfc_ns_to_quanta(ns, 100.0) <= f.quanta[p] + 1u);
  }
  return 0;
}
