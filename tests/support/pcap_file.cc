#include "tests/support/pcap_file.h"

#include <pcap/pcap.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>

namespace spraynet::test {
namespace {

struct PcapCloser {
  void operator()(pcap_t* p) const { pcap_close(p); }
};
struct DumperCloser {
  void operator()(pcap_dumper_t* d) const { pcap_dump_close(d); }
};

}  // namespace

void write_pcap(const std::string& path, const std::vector<Frame>& frames) {
  std::unique_ptr<pcap_t, PcapCloser> p(pcap_open_dead(DLT_EN10MB, 65535));
  if (!p) throw std::runtime_error("pcap_open_dead failed");
  std::unique_ptr<pcap_dumper_t, DumperCloser> d(pcap_dump_open(p.get(), path.c_str()));
  if (!d) throw std::runtime_error("pcap_dump_open(" + path + "): " + pcap_geterr(p.get()));
  long usec = 0;
  for (const Frame& f : frames) {
    pcap_pkthdr h{};
    h.ts.tv_sec = 1;
    h.ts.tv_usec = usec++;
    h.caplen = h.len = static_cast<bpf_u_int32>(f.size());
    pcap_dump(reinterpret_cast<u_char*>(d.get()), &h, f.data());
  }
}

std::vector<Frame> read_pcap(const std::string& path) {
  char err[PCAP_ERRBUF_SIZE];
  std::unique_ptr<pcap_t, PcapCloser> p(pcap_open_offline(path.c_str(), err));
  if (!p) throw std::runtime_error("pcap_open_offline(" + path + "): " + err);
  std::vector<Frame> frames;
  pcap_pkthdr* h;
  const u_char* data;
  int ret;
  while ((ret = pcap_next_ex(p.get(), &h, &data)) == 1) {
    if (h->caplen != h->len) throw std::runtime_error(path + ": a frame was truncated");
    frames.emplace_back(data, data + h->caplen);
  }
  if (ret != PCAP_ERROR_BREAK) {
    throw std::runtime_error("pcap_next_ex(" + path + "): " + pcap_geterr(p.get()));
  }
  return frames;
}

TempPath::TempPath(const std::string& tag)
    : path_((std::filesystem::temp_directory_path() /
             ("spraynet-" + std::to_string(getpid()) + "-" + tag))
                .string()) {}

TempPath::~TempPath() {
  std::remove(path_.c_str());
}

}  // namespace spraynet::test
