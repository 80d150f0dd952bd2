// Reading and writing pcap files with libpcap, for tests that feed net_pcap ports and check
// what they wrote. Linking needs libpcap (see tests/dataplane/runtime/meson.build).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace spraynet::test {

using Frame = std::vector<uint8_t>;

// Writes an Ethernet (DLT_EN10MB) capture, one microsecond apart. Throws on failure.
void write_pcap(const std::string& path, const std::vector<Frame>& frames);

// Every frame of a capture, whole (caplen == len is checked). Throws on failure.
std::vector<Frame> read_pcap(const std::string& path);

// A file name under the system temporary directory, unique to this process and `tag`,
// removed when the object goes out of scope.
class TempPath {
 public:
  explicit TempPath(const std::string& tag);
  ~TempPath();
  TempPath(const TempPath&) = delete;
  TempPath& operator=(const TempPath&) = delete;
  const std::string& str() const { return path_; }

 private:
  std::string path_;
};

}  // namespace spraynet::test
