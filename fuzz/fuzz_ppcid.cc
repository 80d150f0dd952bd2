// PPCID: encode/decode round trips under both layouts, the check nibble, the timestamp hash,
// the layout name parser, and ppcid_read on arbitrary values against arbitrary known path sets.
#include <fuzzer/FuzzedDataProvider.h>

#include <string>

#include "dataplane/wire/ppcid.h"
#include "fuzz/support.h"

using namespace spraynet;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const PpcidLayout layout = in.ConsumeBool() ? PpcidLayout::kPathHigh : PpcidLayout::kTsHigh;
  const PpcidLayout other =
      layout == PpcidLayout::kTsHigh ? PpcidLayout::kPathHigh : PpcidLayout::kTsHigh;
  const uint32_t qp = in.ConsumeIntegral<uint32_t>() & 0xFFFFFF;
  const uint32_t psn = in.ConsumeIntegral<uint32_t>() & 0xFFFFFF;
  const uint8_t path = in.ConsumeIntegral<uint8_t>();
  const uint8_t ts = in.ConsumeIntegral<uint8_t>();
  const uint64_t since = in.ConsumeIntegral<uint64_t>();
  const uint16_t raw = in.ConsumeIntegral<uint16_t>();
  PathIdSet known;
  for (int i = 0; i < 4 && in.remaining_bytes() > 0; ++i) known.set(in.ConsumeIntegral<uint8_t>());
  const std::string name = in.ConsumeRandomLengthString(16);

  FUZZ_CHECK(ppcid_check_nibble(qp, psn) <= 0xF);
  FUZZ_CHECK(ppcid_timestamp_hash(since, 4) <= 0xF);
  (void)ppcid_timestamp_hash(since, 8);

  // Round trip: the encoder's path id (masked to the layout) and check nibble come back.
  const uint8_t path_in = static_cast<uint8_t>(path & max_path_id(layout));
  const uint16_t v = ppcid_encode(layout, path, ts, qp, psn);
  FUZZ_CHECK(v != 0);
  const PpcidFields f = ppcid_decode(v, layout);
  FUZZ_CHECK(f.path_id == path_in);
  FUZZ_CHECK(f.check == ppcid_check_nibble(qp, psn));
  PathIdSet mine;
  mine.set(path_in);
  const PpcidReading r = ppcid_read(v, layout, qp, psn, mine);
  FUZZ_CHECK(r.verdict == PpcidVerdict::kOk && r.path_id == path_in);
  // Another QP/PSN whose check nibble differs never reads as this packet's PPCID.
  if (ppcid_check_nibble(qp ^ 1, psn) != f.check) {
    FUZZ_CHECK(ppcid_read(v, layout, qp ^ 1, psn, mine).verdict == PpcidVerdict::kBadCheck);
  }

  // Any 16-bit value: a verdict consistent with its fields.
  const PpcidReading any = ppcid_read(raw, layout, qp, psn, known);
  switch (any.verdict) {
    case PpcidVerdict::kAbsent:
      FUZZ_CHECK(raw == 0);
      break;
    case PpcidVerdict::kOk:
      FUZZ_CHECK(known.test(any.path_id) && any.path_id == ppcid_decode(raw, layout).path_id);
      break;
    case PpcidVerdict::kLayoutMismatch:
      FUZZ_CHECK(known.test(any.path_id) && any.path_id == ppcid_decode(raw, other).path_id);
      break;
    case PpcidVerdict::kBadCheck:
      FUZZ_CHECK((raw & 0xF) != ppcid_check_nibble(qp, psn));
      break;
    case PpcidVerdict::kUnknownPath:
      FUZZ_CHECK(!known.test(ppcid_decode(raw, layout).path_id));
      break;
  }

  if (const auto l = parse_ppcid_layout(name)) FUZZ_CHECK(to_string(*l) == name);
  return 0;
}
