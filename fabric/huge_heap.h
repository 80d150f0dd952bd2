// fabric_emu's heap on transparent huge pages (see heap_on_huge_pages).
#pragma once

namespace spraynet::fabric {

// fabric_emu's working set is every node's state, hundreds of MB touched at random, one packet
// hop at a time: with 4 KiB pages most hops miss the TLB. glibc's malloc backs its heap with
// transparent huge pages (where the kernel offers them: THP "madvise" or "always") only when
// the glibc.malloc.hugetlb tunable says so, and tunables are read at start-up, so the program
// sets it and starts itself again, once. Measured here: 10-20% more packet-hops per second at
// 64 and at 1024 hosts, the same JSON byte for byte. GLIBC_TUNABLES naming the tunable already
// (glibc.malloc.hugetlb=0 to opt out) is left alone; an exec that fails goes on as it is.
void heap_on_huge_pages(char** argv);

}  // namespace spraynet::fabric
